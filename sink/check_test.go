package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
)

// runCheck runs Check with a bound like the command's.
func runCheck(t *testing.T, cfg Config, routes []schema.Message, routesErr error) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := Check(ctx, cfg, routes, routesErr)
	var b strings.Builder
	_ = check.Report(got).WriteText(&b)
	t.Logf("check:\n%s", b.String())
	return got
}

func checkStatuses(t *testing.T, got []check.Result, want []string) {
	t.Helper()
	names := make([]string, len(got))
	for i, r := range got {
		names[i] = r.Name + "=" + r.Status.String()
		if (r.Status == check.OK) != (r.Fix == "") {
			t.Errorf("check %q is %s with fix %q; want a fix exactly when not ok", r.Name, r.Status, r.Fix)
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("checks:\ngot  %v\nwant %v", names, want)
	}
}

// result is check name in got.
func result(t *testing.T, got []check.Result, name string) check.Result {
	t.Helper()
	for _, r := range got {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("check %q: got none; want one", name)
	return check.Result{}
}

func found(t *testing.T, got []check.Result, name string) string {
	t.Helper()
	return result(t, got, name).Found
}

// brokerSetting reads one setting of the broker that leads the cluster
// metadata, as the test sees it.
func brokerSetting(t *testing.T, brokers []string, name string) string {
	t.Helper()
	client := kafkatest.Client(strings.Join(brokers, ","))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		t.Fatalf("metadata: got %v; want nil", err)
	}
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: fmt.Sprint(md.Controller.ID), ConfigNames: []string{name}}}})
	if err != nil || len(res.Resources) != 1 || res.Resources[0].Error != nil || len(res.Resources[0].ConfigEntries) != 1 {
		t.Fatalf("describe broker %d setting %s: got %+v, %v; want one entry", md.Controller.ID, name, res, err)
	}
	return res.Resources[0].ConfigEntries[0].ConfigValue
}

// A topic with replication factor 1 warns on it and on min.insync.replicas
// 1; min.insync.replicas above the replication factor fails, since every
// acks=all write would; unclean leader election set on a topic warns. The
// rig's one broker cannot give a topic three replicas, and the replication
// factor's warning says so.
func TestCheckTopicSafety(t *testing.T) {
	brokers := testBrokers(t)
	minISR := func(n string) kafka.ConfigEntry {
		return kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: n}
	}
	weak := createTopic(t, brokers, 1, minISR("1"))
	impossible := createTopic(t, brokers, 1, minISR("2"))
	unclean := createTopic(t, brokers, 1, minISR("1"), kafka.ConfigEntry{ConfigName: "unclean.leader.election.enable", ConfigValue: "true"})
	routes := []schema.Message{{Topic: weak}, {Topic: impossible}, {AggregateType: "x", Topic: weak}, {Topic: unclean}}

	got := runCheck(t, Config{Brokers: brokers, TopicTemplate: "unused.{aggregate_type}"}, routes, nil)

	// The check reports topics in name order; the names are random.
	statuses := map[string][3]string{weak: {"warn", "warn", "ok"}, impossible: {"warn", "fail", "ok"}, unclean: {"warn", "warn", "warn"}}
	topics := []string{weak, impossible, unclean}
	slices.Sort(topics)
	want := []string{"kafka reachable=ok", "kafka tls=warn", "kafka idempotence=ok", "topics=ok"}
	for _, topic := range topics {
		want = append(want, "topic "+topic+"=ok")
	}
	for _, topic := range topics {
		s := statuses[topic]
		want = append(want, "topic "+topic+" replication factor="+s[0], "topic "+topic+" min.insync.replicas="+s[1],
			"topic "+topic+" unclean.leader.election.enable="+s[2])
	}
	checkStatuses(t, got, want)
	for name, want := range map[string]string{
		"topics":                                               "3 from template",
		"topic " + weak + " replication factor":                "1, on a cluster of 1 broker(s), which cannot keep 3 replicas",
		"topic " + weak + " min.insync.replicas":               "1 (set on the topic)",
		"topic " + impossible + " min.insync.replicas":         "2 (set on the topic), above the replication factor 1",
		"topic " + weak + " unclean.leader.election.enable":    "false (broker default)",
		"topic " + unclean + " unclean.leader.election.enable": "true (set on the topic): a replica that is not in sync can become a partition's leader, and an acknowledged message can be lost",
	} {
		if f := found(t, got, name); !strings.HasPrefix(f, want) {
			t.Errorf("check %q found: got %q; want it to start with %q", name, f, want)
		}
	}
	wantFix := "kafka-configs.sh --bootstrap-server " + strings.Join(brokers, ",") + " --alter --entity-type topics --entity-name " + unclean +
		" --add-config unclean.leader.election.enable=false"
	if f := result(t, got, "topic "+unclean+" unclean.leader.election.enable").Fix; !strings.Contains(f, wantFix) {
		t.Errorf("fix: got %q; want it to contain %q", f, wantFix)
	}
}

// Without a topic setting, min.insync.replicas and unclean leader election
// are the broker's defaults.
func TestCheckSettingsFallBackToBrokerDefault(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 1)

	got := runCheck(t, Config{Brokers: brokers, TopicTemplate: topic}, nil, errors.New("postgres is not reachable"))

	for _, name := range []string{"min.insync.replicas", "unclean.leader.election.enable"} {
		want := brokerSetting(t, brokers, name) + " (broker default)"
		if f := found(t, got, "topic "+topic+" "+name); !strings.HasPrefix(f, want) {
			t.Errorf("%s found: got %q; want it to start with %q", name, f, want)
		}
	}
}

// A missing topic fails when the broker does not create topics and warns
// when it does; either way, the check creates nothing.
func TestCheckMissingTopic(t *testing.T) {
	brokers := testBrokers(t)
	topic := rig.Unique("walrelay-check-missing-")
	autoCreate := brokerSetting(t, brokers, "auto.create.topics.enable")
	want := "fail"
	if autoCreate == "true" {
		want = "warn"
	}

	got := runCheck(t, Config{Brokers: brokers, TopicTemplate: "orders.{type}"}, []schema.Message{{Type: "x", Topic: topic}}, nil)

	checkStatuses(t, got, []string{"kafka reachable=ok", "kafka tls=warn", "kafka idempotence=ok", "topics=ok", "topic " + topic + "=" + want})
	if f := found(t, got, "topic "+topic); !strings.Contains(f, "auto.create.topics.enable="+autoCreate) {
		t.Errorf("found: got %q; want the broker's auto.create.topics.enable=%s", f, autoCreate)
	}
	if kafkatest.TopicExists(t, strings.Join(brokers, ","), topic) {
		t.Errorf("topic %s after the check: got it; want it still missing", topic)
	}
}

// With placeholders in the template, the topics are only known from rows.
func TestCheckTopicsFromTemplate(t *testing.T) {
	brokers := testBrokers(t)
	cfg := Config{Brokers: brokers, TopicTemplate: "walrelay-check-{aggregate_type}"}
	for _, tc := range []struct {
		name      string
		routes    []schema.Message
		routesErr error
		want      string
	}{
		{"no rows", nil, nil, "the outbox table has no rows: topics cannot be known yet"},
		{"rows unreadable", nil, errors.New("postgres is not reachable"), "could not be read (postgres is not reachable)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runCheck(t, cfg, tc.routes, tc.routesErr)
			checkStatuses(t, got, []string{"kafka reachable=ok", "kafka tls=warn", "kafka idempotence=ok", "topics=warn"})
			if f := found(t, got, "topics"); !strings.Contains(f, tc.want) {
				t.Errorf("topics found: got %q; want it to contain %q", f, tc.want)
			}
		})
	}
}

func TestWantedTopics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template string
		routes   []schema.Message
		err      error
		want     []string
		known    bool
	}{
		{"fixed template", "events", nil, nil, []string{"events"}, true},
		{"fixed template, rows unreadable", "events", nil, errors.New("x"), []string{"events"}, true},
		{"fixed template and a row's own topic", "events", []schema.Message{{Topic: "audit"}, {AggregateType: "a"}}, nil, []string{"audit", "events"}, true},
		{"placeholders", "o.{aggregate_type}.{type}", []schema.Message{
			{AggregateType: "order", Type: "created"}, {AggregateType: "order", Type: "created", Topic: ""},
			{AggregateType: "user", Type: "x"}, {AggregateType: "user", Type: "y", Topic: "special"},
		}, nil, []string{"o.order.created", "o.user.x", "special"}, true},
		{"placeholders, no rows", "o.{type}", nil, nil, nil, false},
		{"placeholders, rows unreadable", "o.{type}", nil, errors.New("x"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known, res := wantedTopics(tc.template, tc.routes, tc.err)
			if !slices.Equal(got, tc.want) || known != tc.known {
				t.Errorf("wantedTopics: got %v, %v; want %v, %v", got, known, tc.want, tc.known)
			}
			if wantStatus := map[bool]check.Status{true: check.OK, false: check.Warn}[tc.known]; res.Status != wantStatus {
				t.Errorf("result: got %+v; want status %s", res, wantStatus)
			}
		})
	}
}

// An unreachable broker fails at once and leaves the other checks out.
func TestCheckUnreachableBroker(t *testing.T) {
	start := time.Now()
	got := runCheck(t, Config{Brokers: []string{"127.0.0.1:1"}, TopicTemplate: "events"}, nil, nil)
	checkStatuses(t, got, []string{"kafka reachable=fail"})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s; want a refused connection to fail at once", took)
	}
}

// The verdicts on settings this rig's broker does not have: topic creation
// off or unreadable, replicas out of sync, a healthy topic, clusters of
// three brokers and of fewer, unclean leader election from the topic and
// from the broker.
func TestCheckVerdicts(t *testing.T) {
	topic := func(replicas, inSync int) kafka.Topic {
		p := kafka.Partition{Replicas: make([]kafka.Broker, replicas), Isr: make([]kafka.Broker, inSync)}
		return kafka.Topic{Name: "t", Partitions: []kafka.Partition{p, {Replicas: make([]kafka.Broker, 3), Isr: make([]kafka.Broker, 3)}}}
	}
	const bootstrap = "k1:9092,k2:9092"
	off := &kafkaChecker{bootstrap: bootstrap,
		broker: map[string]string{"auto.create.topics.enable": "false", "min.insync.replicas": "2", "unclean.leader.election.enable": "false"}}
	uncleanBroker := &kafkaChecker{bootstrap: bootstrap, broker: map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}}
	unknown := &kafkaChecker{bootstrap: bootstrap, brokerErr: errors.New("not authorized")}
	for _, tc := range []struct {
		name   string
		got    check.Result
		status check.Status
		found  string
		fix    string // a part of the fix
	}{
		{"creation off", off.missingResult("t"), check.Fail, "missing, and the broker does not create topics (auto.create.topics.enable=false)",
			"kafka-topics.sh --bootstrap-server " + bootstrap + " --create --topic t"},
		{"creation unknown", unknown.missingResult("t"), check.Fail, "missing, and auto.create.topics.enable is unknown", "--replication-factor 3"},
		{"healthy", off.minISRResult(topic(3, 3), setting{}, nil), check.OK, "2 (broker default)", ""},
		{"replicas out of sync", off.minISRResult(topic(3, 1), setting{value: "2", ownValue: true}, nil), check.Fail,
			"2 (set on the topic), but a partition has only 1 replicas in sync", "Bring the out-of-sync replicas back"},
		{"min.insync.replicas 1 from the broker", uncleanBroker.minISRResult(topic(3, 3), setting{}, nil), check.Warn,
			"1 (broker default): an acknowledged message may be on one broker only",
			"kafka-configs.sh --bootstrap-server " + bootstrap + " --alter --entity-type topics --entity-name t --add-config min.insync.replicas=2"},
		{"min.insync.replicas 1 on the topic", off.minISRResult(topic(3, 3), setting{value: "1", ownValue: true}, nil), check.Warn,
			"1 (set on the topic)", "--add-config min.insync.replicas=2"},
		{"nothing readable", unknown.minISRResult(topic(3, 3), setting{}, errors.New("denied")), check.Warn, "unknown", "DescribeConfigs"},
		{"replication factor 3", off.replicationResult(topic(3, 3), 3), check.OK, "3", ""},
		{"one partition with 2 replicas on 3 brokers", off.replicationResult(topic(2, 2), 3), check.Warn, "2: losing a broker can lose acknowledged messages",
			"kafka-reassign-partitions.sh --bootstrap-server " + bootstrap + " --reassignment-json-file FILE --execute, with FILE listing 3 replicas for each partition of t"},
		{"replication factor 1 on 5 brokers", off.replicationResult(topic(1, 1), 5), check.Warn, "1: losing a broker", "Raise it to 3: kafka-reassign-partitions.sh"},
		{"replication factor 1 on 1 broker", off.replicationResult(topic(1, 1), 1), check.Warn,
			"1, on a cluster of 1 broker(s), which cannot keep 3 replicas of a partition: losing one broker can lose acknowledged messages",
			"run Kafka with at least 3 brokers, then raise"},
		{"replication factor 2 on 2 brokers", off.replicationResult(topic(2, 2), 2), check.Warn, "2, on a cluster of 2 broker(s)", "at least 3 brokers"},
		{"unclean election off by the broker", off.uncleanResult(topic(3, 3), setting{}, nil), check.OK, "false (broker default)", ""},
		{"unclean election off on the topic", uncleanBroker.uncleanResult(topic(3, 3), setting{value: "false", ownValue: true}, nil), check.OK,
			"false (set on the topic)", ""},
		{"unclean election on the topic", off.uncleanResult(topic(3, 3), setting{value: "true", ownValue: true}, nil), check.Warn,
			"true (set on the topic): a replica that is not in sync can become a partition's leader, and an acknowledged message can be lost",
			"kafka-configs.sh --bootstrap-server " + bootstrap + " --alter --entity-type topics --entity-name t --add-config unclean.leader.election.enable=false."},
		{"unclean election by the broker, read from the topic", off.uncleanResult(topic(3, 3), setting{value: "true"}, nil), check.Warn,
			"true (broker default): a replica that is not in sync", "applies to every topic that does not set it"},
		{"unclean election by the broker", uncleanBroker.uncleanResult(topic(3, 3), setting{}, errors.New("timeout")), check.Warn,
			"true (broker default)", "--add-config unclean.leader.election.enable=false"},
		{"unclean election unreadable", unknown.uncleanResult(topic(3, 3), setting{}, errors.New("denied")), check.Warn,
			"unknown: neither the topic's nor the broker's value could be read (denied; not authorized)", "DescribeConfigs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Status != tc.status || !strings.HasPrefix(tc.got.Found, tc.found) {
				t.Errorf("got %s %q; want %s %q...", tc.got.Status, tc.got.Found, tc.status, tc.found)
			}
			if (tc.fix == "") != (tc.got.Fix == "") || !strings.Contains(tc.got.Fix, tc.fix) {
				t.Errorf("fix: got %q; want one containing %q", tc.got.Fix, tc.fix)
			}
		})
	}
}

// The "kafka tls" check is ok with TLS and warns without, saying what
// travels in clear text.
func TestSecurityResult(t *testing.T) {
	scram, err := scramSHA512()
	if err != nil {
		t.Fatal(err)
	}
	plainMech := plain.Mechanism{Username: "u", Password: "p"}
	withCA := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "kafka.example", Certificates: make([]tls.Certificate, 1)}
	tests := []struct {
		name   string
		tc     *tls.Config
		mech   sasl.Mechanism
		status check.Status
		found  string
	}{
		{"nothing", nil, nil, check.Warn, "no TLS: messages travel unencrypted; no SASL"},
		{"PLAIN without TLS", nil, plainMech, check.Warn, "no TLS: messages travel unencrypted; SASL PLAIN, whose credentials travel in clear text"},
		{"SCRAM without TLS", nil, scram, check.Warn, "no TLS: messages travel unencrypted; SASL SCRAM-SHA-512"},
		{"system roots", &tls.Config{}, nil, check.OK, "TLS, the brokers' certificates verified against the system's roots; no SASL"},
		{"everything", withCA, scram, check.OK, "TLS, the brokers' certificates verified against the given CAs for the name kafka.example; a client certificate; SASL SCRAM-SHA-512"},
	}
	for _, tt := range tests {
		r := securityResult(tt.tc, tt.mech)
		if r.Name != "kafka tls" || r.Status != tt.status || r.Found != tt.found {
			t.Errorf("%s: got %s %s %q; want kafka tls %s %q", tt.name, r.Name, r.Status, r.Found, tt.status, tt.found)
		}
		if tt.status == check.Warn && !strings.Contains(r.Fix, SettingTLS) {
			t.Errorf("%s: fix %q; want it to name %s", tt.name, r.Fix, SettingTLS)
		}
	}
}

func scramSHA512() (sasl.Mechanism, error) { return scram.Mechanism(scram.SHA512, "u", "p") }

// The "kafka idempotence" check asks the broker for a producer id as the
// sink does: granted on the rig's broker; with idempotence turned off it
// says so without asking.
func TestCheckIdempotence(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 1)
	for _, tc := range []struct {
		off  bool
		want string
	}{
		{false, "granted (producer id "},
		{true, "off, as configured"},
	} {
		got := runCheck(t, Config{Brokers: brokers, TopicTemplate: topic, NoIdempotence: tc.off}, nil, nil)
		r := result(t, got, "kafka idempotence")
		if r.Status != check.OK || !strings.HasPrefix(r.Found, tc.want) {
			t.Errorf("idempotence off %t: got %s %q; want ok, %q...", tc.off, r.Status, r.Found, tc.want)
		}
	}
}
