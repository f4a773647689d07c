package harness

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// The durability of a cluster fixture's topics: as users run Kafka, three
// replicas and a write with acks=all needing two in sync.
const (
	// ClusterPartitions is the partition count of a cluster fixture's
	// topics (the cluster's num.partitions): enough that each broker leads
	// a few, so a broker's fault hits some partitions and not others.
	ClusterPartitions = 8
	clusterReplicas   = 3
	clusterMinISR     = "2"
)

// NewOnCluster is New on the rig's three-broker cluster: the fixture's
// topics (and its commands' --kafka-brokers, and its verifier) are the
// cluster's. Each topic has ClusterPartitions partitions and three
// replicas; it takes min.insync.replicas from the cluster, and the test
// fails unless that is 2 (the rig's setting really applies). NewOnCluster
// returns once every replica of every partition is in sync.
func NewOnCluster(t *testing.T, c *rig.Cluster, aggregateTypes ...string) *Fixture {
	t.Helper()
	pgURL, _ := testkit.Services(t)
	f := newFixture(t, pgURL, c.Bootstrap())
	topics := f.topicsOf(aggregateTypes)
	// newFixture deletes every topic of the fixture's prefix in t.Cleanup.
	f.createClusterTopics(topics)
	c.WaitInSync(t, time.Minute, topics...)
	f.checkDurable(c, topics)
	return f
}

func (f *Fixture) createClusterTopics(topics []string) {
	f.t.Helper()
	req := &kafka.CreateTopicsRequest{}
	for _, topic := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: topic, NumPartitions: ClusterPartitions, ReplicationFactor: clusterReplicas})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := kafkatest.Client(f.Brokers).CreateTopics(ctx, req)
	testkit.Must(f.t, err, "create topics %v on the cluster", topics)
	for _, topic := range topics {
		testkit.Must(f.t, res.Errors[topic], "create topic %s on the cluster", topic)
	}
}

// checkDurable fails the test unless each topic has ClusterPartitions
// partitions of three replicas and min.insync.replicas 2.
func (f *Fixture) checkDurable(c *rig.Cluster, topics []string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parts, err := c.Partitions(ctx, topics...)
	testkit.Must(f.t, err, "read the metadata of %v", topics)
	count := map[string]int{}
	for _, p := range parts {
		count[p.Topic]++
		if len(p.Replicas) != clusterReplicas {
			f.t.Fatalf("%s/%d: got %d replicas; want %d", p.Topic, p.ID, len(p.Replicas), clusterReplicas)
		}
	}
	req := &kafka.DescribeConfigsRequest{}
	for _, topic := range topics {
		if count[topic] != ClusterPartitions {
			f.t.Fatalf("%s: got %d partitions; want %d", topic, count[topic], ClusterPartitions)
		}
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas"}})
	}
	res, err := kafkatest.Client(f.Brokers).DescribeConfigs(ctx, req)
	testkit.Must(f.t, err, "describe the configuration of %v", topics)
	for _, r := range res.Resources {
		testkit.Must(f.t, r.Error, "describe the configuration of %s", r.ResourceName)
		got := "(none)"
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "min.insync.replicas" {
				got = e.ConfigValue
			}
		}
		if got != clusterMinISR {
			f.t.Fatalf("%s: min.insync.replicas = %s; want %s (the controllers' setting, scripts/kafka/cluster-common.properties)", r.ResourceName, got, clusterMinISR)
		}
	}
}
