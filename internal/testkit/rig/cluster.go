package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// Cluster is the rig's three-broker KRaft cluster (scripts/kafka-cluster.sh):
// three controllers (node ids 1-3) and three brokers (node ids 4-6), with
// replication factor 3 and min.insync.replicas 2. Tests stop and start its
// nodes through the script, which keeps each node's pid.
//
// Broker n (1, 2 or 3) is node id n+3 and the (n-1)th address of each list.
type Cluster struct {
	Brokers []string // the brokers' PLAINTEXT listeners
	Proxied []string // their PROXIED listeners, where a test's proxy forwards to
	Proxy   []string // the addresses the PROXIED listeners are advertised at
}

// Role is the kind of a cluster node, as scripts/kafka-cluster.sh names it.
type Role string

const (
	Broker     Role = "broker"
	Controller Role = "controller"
)

// BrokerID is broker n's node id; BrokerOf is the broker whose node id is
// id.
func BrokerID(n int) int  { return n + 3 }
func BrokerOf(id int) int { return id - 3 }

// nodeStartBound bounds the script's start of one node; the script bounds
// its own waits (180 s by default) and this only keeps a hung script from
// hanging the test.
const nodeStartBound = 4 * time.Minute

// KafkaCluster is the rig's cluster from WALRELAY_TEST_KAFKA_CLUSTER_BROKERS,
// _PROXIED and _PROXY (scripts/kafka-cluster.sh env), or the end of the
// test as Env ends it: a skip under -short, a failure otherwise.
func KafkaCluster(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{
		Brokers: clusterEnv(t, "WALRELAY_TEST_KAFKA_CLUSTER_BROKERS"),
		Proxied: clusterEnv(t, "WALRELAY_TEST_KAFKA_CLUSTER_PROXIED"),
		Proxy:   clusterEnv(t, "WALRELAY_TEST_KAFKA_CLUSTER_PROXY"),
	}
	if len(c.Brokers) != 3 || len(c.Proxied) != 3 || len(c.Proxy) != 3 {
		t.Fatalf("cluster addresses %v, %v, %v: want three of each", c.Brokers, c.Proxied, c.Proxy)
	}
	return c
}

// clusterEnv is Env for the cluster's variables, which scripts/rig.sh does
// not print: the failure says where they come from. It returns the list
// the variable holds.
func clusterEnv(t testing.TB, name string) []string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			t.Skipf("needs %s (scripts/faults.sh sets it)", name)
		}
		t.Fatalf("%s is not set: run scripts/faults.sh, or `eval \"$(scripts/kafka-cluster.sh env)\"` after `scripts/kafka-cluster.sh start`", name)
	}
	return strings.Split(v, ",")
}

// Bootstrap is the brokers' list, comma-separated.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Brokers, ",") }

// Kill ends nodes ns of role with SIGKILL, all at once, and waits until
// they are gone. A node is started again at the end of the test if it is
// still down then.
func (c *Cluster) Kill(t testing.TB, role Role, ns ...int) {
	t.Helper()
	c.stop(t, role, ns, "--kill")
}

// Terminate ends nodes ns of role with SIGTERM (a broker's controlled
// shutdown: it hands its leaders over first), all at once, and waits until
// they are gone. A node is started again at the end of the test if it is
// still down then.
func (c *Cluster) Terminate(t testing.TB, role Role, ns ...int) {
	t.Helper()
	c.stop(t, role, ns)
}

func (c *Cluster) stop(t testing.TB, role Role, ns []int, flags ...string) {
	t.Helper()
	t.Cleanup(func() {
		// The other tests need the whole cluster: a node a failed test left
		// down comes back (the script does nothing for one that runs).
		if err := c.each(role, ns, "start-node"); err != nil {
			t.Errorf("start %s %v again after the test: %v", role, ns, err)
		}
	})
	if err := c.each(role, ns, "stop-node", flags...); err != nil {
		t.Fatalf("stop %s %v: %v", role, ns, err)
	}
}

// Start starts nodes ns of role, all at once, and waits until they answer:
// a broker once it is unfenced and serves metadata, a controller once it
// listens.
func (c *Cluster) Start(t testing.TB, role Role, ns ...int) {
	t.Helper()
	if err := c.each(role, ns, "start-node"); err != nil {
		t.Fatalf("start %s %v: %v", role, ns, err)
	}
}

// each runs `scripts/kafka-cluster.sh verb role n flags...` for every n of
// ns at once, and returns their errors, each with the script's output.
func (c *Cluster) each(role Role, ns []int, verb string, flags ...string) error {
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			args := append([]string{verb, string(role), strconv.Itoa(n)}, flags...)
			if out, err := clusterScript(nodeStartBound, args...); err != nil {
				errs[i] = fmt.Errorf("%s %s %d: %w\n%s", verb, role, n, err, out)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Pid is the process id of node n of role.
func (c *Cluster) Pid(t testing.TB, role Role, n int) int {
	t.Helper()
	out := strings.TrimSpace(Script(t, "kafka-cluster.sh", "pid", string(role), strconv.Itoa(n)))
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("pid of %s %d: got %q; want a number", role, n, out)
	}
	return pid
}

// ActiveController is the controller (1, 2 or 3) that leads the metadata
// quorum, waiting up to 30 s for one while an election is under way.
func (c *Cluster) ActiveController(t testing.TB) int {
	t.Helper()
	var id int
	poll.EventuallyEvery(t, 30*time.Second, 200*time.Millisecond, "an active controller", func() (string, bool) {
		out, err := clusterScript(10*time.Second, "active-controller")
		if err != nil {
			return out, false
		}
		id, err = strconv.Atoi(strings.TrimSpace(out))
		return out, err == nil
	})
	return id
}

// clusterScript runs scripts/kafka-cluster.sh without failing the test
// (in a cleanup, or inside a wait) and returns its output.
func clusterScript(within time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "scripts", "kafka-cluster.sh"), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Partitions is every partition of topics as the cluster's metadata shows
// it now: leader, replicas and in-sync replicas.
func (c *Cluster) Partitions(ctx context.Context, topics ...string) ([]kafka.Partition, error) {
	client, done := c.client()
	defer done()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("read the metadata of %v: %w", topics, err)
	}
	var out []kafka.Partition
	for _, tp := range md.Topics {
		if tp.Error != nil {
			return nil, fmt.Errorf("metadata of %s: %w", tp.Name, tp.Error)
		}
		out = append(out, tp.Partitions...)
	}
	return out, nil
}

// EndOffsets is the end offset of every partition of topics, asked of the
// partitions' leaders now.
func (c *Cluster) EndOffsets(ctx context.Context, topics ...string) (map[kafkatest.Partition]int64, error) {
	client, done := c.client()
	defer done()
	req := map[string][]kafka.OffsetRequest{}
	parts, err := c.Partitions(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		req[p.Topic] = append(req[p.Topic], kafka.LastOffsetOf(p.ID))
	}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		return nil, fmt.Errorf("list the end offsets of %v: %w", topics, err)
	}
	out := map[kafkatest.Partition]int64{}
	for topic, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("end offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			out[kafkatest.Partition{Topic: topic, Partition: int32(p.Partition)}] = p.LastOffset
		}
	}
	return out, nil
}

// partitions is Partitions, retried for up to 30 s (a broker just killed
// may still be asked first), or the end of the test.
func (c *Cluster) partitions(t testing.TB, topics ...string) []kafka.Partition {
	t.Helper()
	var parts []kafka.Partition
	poll.EventuallyEvery(t, 30*time.Second, 200*time.Millisecond, fmt.Sprintf("the metadata of %v", topics), func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		parts, err = c.Partitions(ctx, topics...)
		return fmt.Sprint(err), err == nil
	})
	return parts
}

// Busiest is the broker (1, 2 or 3) that leads the most partitions of
// topics, and how many it leads.
func (c *Cluster) Busiest(t testing.TB, topics ...string) (n, led int) {
	t.Helper()
	count := map[int]int{}
	for _, p := range c.partitions(t, topics...) {
		if p.Leader.ID >= BrokerID(1) {
			count[BrokerOf(p.Leader.ID)]++
		}
	}
	for b := 1; b <= 3; b++ {
		if count[b] > led {
			n, led = b, count[b]
		}
	}
	if n == 0 {
		t.Fatalf("no broker leads a partition of %v", topics)
	}
	return n, led
}

// Led is the partitions of topic that broker n leads.
func (c *Cluster) Led(t testing.TB, topic string, n int) []int {
	t.Helper()
	var out []int
	for _, p := range c.partitions(t, topic) {
		if p.Leader.ID == BrokerID(n) {
			out = append(out, p.ID)
		}
	}
	return out
}

// ElectPreferred runs a preferred-leader election on partitions of topic:
// each gets its first replica as leader again, if that one is in sync. A
// partition whose preferred leader leads already is no error.
func (c *Cluster) ElectPreferred(t testing.TB, topic string, partitions []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, done := c.client()
	defer done()
	res, err := client.ElectLeaders(ctx, &kafka.ElectLeadersRequest{Topic: topic, Partitions: partitions, Timeout: 30 * time.Second})
	if err == nil {
		err = res.Error
	}
	if err == nil {
		for _, p := range res.PartitionResults {
			if p.Error != nil && !errors.Is(p.Error, kafka.ElectionNotNeeded) {
				err = errors.Join(err, fmt.Errorf("partition %d: %w", p.Partition, p.Error))
			}
		}
	}
	if err != nil {
		t.Fatalf("preferred-leader election on %s %v: %v", topic, partitions, err)
	}
}

// Reassign asks the cluster to move partitions of topic to the replicas
// given (node ids, the preferred leader first) and returns at once; the
// move completes in the background (WaitReplicas).
func (c *Cluster) Reassign(t testing.TB, topic string, replicas map[int][]int) {
	t.Helper()
	req := &kafka.AlterPartitionReassignmentsRequest{Topic: topic, Timeout: 30 * time.Second}
	for p, ids := range replicas {
		req.Assignments = append(req.Assignments, kafka.AlterPartitionReassignmentsRequestAssignment{Topic: topic, PartitionID: p, BrokerIDs: ids})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, done := c.client()
	defer done()
	res, err := client.AlterPartitionReassignments(ctx, req)
	if err == nil {
		err = res.Error
	}
	if err == nil {
		for _, p := range res.PartitionResults {
			if p.Error != nil {
				err = errors.Join(err, fmt.Errorf("partition %d: %w", p.PartitionID, p.Error))
			}
		}
	}
	if err != nil {
		t.Fatalf("reassign %s %v: %v", topic, replicas, err)
	}
}

// WaitReplicas waits until each partition of topic named in replicas has
// exactly those replicas, all in sync (a reassignment done), and returns
// how long that took.
func (c *Cluster) WaitReplicas(t testing.TB, within time.Duration, topic string, replicas map[int][]int) time.Duration {
	t.Helper()
	start := time.Now()
	poll.EventuallyEvery(t, within, 250*time.Millisecond, fmt.Sprintf("partitions of %s on replicas %v, all in sync", topic, replicas), func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		parts, err := c.Partitions(ctx, topic)
		if err != nil {
			return err.Error(), false
		}
		var off []string
		for _, p := range parts {
			want, ok := replicas[p.ID]
			if ok && (!slices.Equal(ids(p.Replicas), want) || len(p.Isr) != len(want)) {
				off = append(off, fmt.Sprintf("%d: replicas %v, in sync %v", p.ID, ids(p.Replicas), ids(p.Isr)))
			}
		}
		return strings.Join(off, "; "), len(off) == 0
	})
	return time.Since(start)
}

// WaitInSync waits until every partition of topics has a leader and all
// its replicas alive and in sync (a restarted broker caught up), and
// returns how long that took.
func (c *Cluster) WaitInSync(t testing.TB, within time.Duration, topics ...string) time.Duration {
	t.Helper()
	start := time.Now()
	poll.EventuallyEvery(t, within, 250*time.Millisecond, fmt.Sprintf("every partition of %v with all its replicas in sync", topics), func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		parts, err := c.Partitions(ctx, topics...)
		if err != nil {
			return err.Error(), false
		}
		var short []string
		for _, p := range parts {
			if len(p.Isr) < len(p.Replicas) || p.Leader.ID == 0 || slices.Contains(ids(p.Replicas), 0) {
				short = append(short, fmt.Sprintf("%s/%d: leader %d, replicas %v, in sync %v", p.Topic, p.ID, p.Leader.ID, ids(p.Replicas), ids(p.Isr)))
			}
		}
		return strings.Join(short, "; "), len(short) == 0
	})
	return time.Since(start)
}

// client is a client of the cluster on a transport of its own, and the
// function that releases it: kafka-go's transports answer metadata
// requests from a cache that may be seconds old, and route admin requests
// by it, while the tests move leaders and stop brokers.
func (c *Cluster) client() (*kafka.Client, func()) {
	tr := &kafka.Transport{}
	return &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: 30 * time.Second, Transport: tr}, tr.CloseIdleConnections
}

// ids is the node ids of brokers. kafka-go fills in a partition's leader,
// replicas and in-sync replicas from the brokers the metadata lists, which
// are the live ones: a node that is down (or no leader at all) is id 0.
func ids(brokers []kafka.Broker) []int {
	out := make([]int, len(brokers))
	for i, b := range brokers {
		out[i] = b.ID
	}
	return out
}
