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

func found(t *testing.T, got []check.Result, name string) string {
	t.Helper()
	for _, r := range got {
		if r.Name == name {
			return r.Found
		}
	}
	t.Fatalf("check %q: got none; want one", name)
	return ""
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
// acks=all write would.
func TestCheckTopicSafety(t *testing.T) {
	brokers := testBrokers(t)
	weak := createTopic(t, brokers, 1, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: "1"})
	impossible := createTopic(t, brokers, 1, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: "2"})
	routes := []schema.Message{{Topic: weak}, {Topic: impossible}, {AggregateType: "x", Topic: weak}}

	got := runCheck(t, Config{Brokers: brokers, TopicTemplate: "unused.{aggregate_type}"}, routes, nil)

	// The check reports topics in name order; the names are random.
	want := map[string][]string{
		weak:       {"topic " + weak + " replication factor=warn", "topic " + weak + " min.insync.replicas=warn"},
		impossible: {"topic " + impossible + " replication factor=warn", "topic " + impossible + " min.insync.replicas=fail"},
	}
	first, second := min(weak, impossible), max(weak, impossible)
	checkStatuses(t, got, slices.Concat([]string{"kafka reachable=ok", "kafka tls=warn", "topics=ok",
		"topic " + first + "=ok", "topic " + second + "=ok"}, want[first], want[second]))
	for name, want := range map[string]string{
		"topics":                                       "2 from template",
		"topic " + weak + " replication factor":        "1: ",
		"topic " + weak + " min.insync.replicas":       "1 (set on the topic)",
		"topic " + impossible + " min.insync.replicas": "2 (set on the topic), above the replication factor 1",
	} {
		if f := found(t, got, name); !strings.HasPrefix(f, want) {
			t.Errorf("check %q found: got %q; want it to start with %q", name, f, want)
		}
	}
}

// Without a topic setting, min.insync.replicas is the broker's default.
func TestCheckMinISRFallsBackToBrokerDefault(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 1)
	def := brokerSetting(t, brokers, "min.insync.replicas")

	got := runCheck(t, Config{Brokers: brokers, TopicTemplate: topic}, nil, errors.New("postgres is not reachable"))

	want := def + " (broker default)"
	if f := found(t, got, "topic "+topic+" min.insync.replicas"); !strings.HasPrefix(f, want) {
		t.Errorf("min.insync.replicas found: got %q; want it to start with %q", f, want)
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

	checkStatuses(t, got, []string{"kafka reachable=ok", "kafka tls=warn", "topics=ok", "topic " + topic + "=" + want})
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
			checkStatuses(t, got, []string{"kafka reachable=ok", "kafka tls=warn", "topics=warn"})
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
// off or unreadable, replicas out of sync, a healthy topic.
func TestCheckVerdicts(t *testing.T) {
	topic := func(replicas, inSync int) kafka.Topic {
		p := kafka.Partition{Replicas: make([]kafka.Broker, replicas), Isr: make([]kafka.Broker, inSync)}
		return kafka.Topic{Name: "t", Partitions: []kafka.Partition{p, {Replicas: make([]kafka.Broker, 3), Isr: make([]kafka.Broker, 3)}}}
	}
	off := &kafkaChecker{broker: map[string]string{"auto.create.topics.enable": "false", "min.insync.replicas": "2"}}
	unknown := &kafkaChecker{brokerErr: errors.New("not authorized")}
	for _, tc := range []struct {
		name   string
		got    check.Result
		status check.Status
		found  string
	}{
		{"creation off", off.missingResult("t"), check.Fail, "missing, and the broker does not create topics (auto.create.topics.enable=false)"},
		{"creation unknown", unknown.missingResult("t"), check.Fail, "missing, and auto.create.topics.enable is unknown"},
		{"healthy", off.minISRResult(topic(3, 3), isrSetting{}, nil), check.OK, "2 (broker default)"},
		{"replicas out of sync", off.minISRResult(topic(3, 1), isrSetting{value: 2, ownValue: true}, nil), check.Fail,
			"2 (set on the topic), but a partition has only 1 replicas in sync"},
		{"nothing readable", unknown.minISRResult(topic(3, 3), isrSetting{}, errors.New("denied")), check.Warn, "unknown"},
		{"replication factor 3", replicationResult(topic(3, 3)), check.OK, "3"},
		{"one partition with 2 replicas", replicationResult(topic(2, 2)), check.Warn, "2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Status != tc.status || !strings.HasPrefix(tc.got.Found, tc.found) {
				t.Errorf("got %s %q; want %s %q...", tc.got.Status, tc.got.Found, tc.status, tc.found)
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
