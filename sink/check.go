package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/walrelay/walrelay/internal/backoff"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// Broker and topic settings the checks read.
//
// The durability settings in the words of Kafka's documentation
// (https://kafka.apache.org/documentation/, the anchor after each quote):
//   - min.insync.replicas (#topicconfigs_min.insync.replicas): "When a
//     producer sets acks to "all" (or "-1"), this configuration specifies the
//     minimum number of replicas that must acknowledge a write for the write
//     to be considered successful"; "a typical scenario would be to create a
//     topic with a replication factor of 3, set min.insync.replicas to 2, and
//     produce with acks of "all"". walrelay always produces with acks=all.
//   - unclean.leader.election.enable
//     (#topicconfigs_unclean.leader.election.enable): "Indicates whether to
//     enable replicas not in the ISR set to be elected as leader as a last
//     resort, even though doing so may result in data loss." Such a leader's
//     log "becomes the source of truth even though it is not guaranteed to
//     have every committed message" (#design_uncleanleader); off by default
//     since Kafka 0.11.0.0.
//   - the replication factor: "With this ISR model and f+1 replicas, a Kafka
//     topic can tolerate f failures without losing committed messages"
//     (#design_replicatedlog); acks=all waits for the replicas in sync at the
//     time, so with too few of them an acknowledged write "could be lost if
//     the remaining replica also fails" (#design_ha).
const (
	configAutoCreate    = "auto.create.topics.enable"
	configMinISR        = "min.insync.replicas"
	configUnclean       = "unclean.leader.election.enable"
	configDefaultRF     = "default.replication.factor"
	configNumPartitions = "num.partitions"
)

// Below these, an acknowledged message is at risk: with fewer than three
// replicas or fewer than two in sync, one broker's loss can lose it.
const (
	wantReplicationFactor = 3
	wantMinISR            = 2
)

// Check is the Kafka half of `walrelay check`: are the brokers reachable,
// is the connection protected (TLS, SASL: reported for the transport Check
// makes, not for a caller's cfg.Transport), do the topics walrelay will
// write exist, and do they keep an acknowledged message safe (replication
// factor against the cluster's brokers, min.insync.replicas, unclean leader
// election). It only reads:
// it asks for no topic creation and changes no setting.
//
// The topics are cfg.TopicTemplate with routes filled in (messages with only
// AggregateType, Type and Topic set, say those of the latest outbox rows),
// and the template itself when it has no placeholders. routesErr says why
// routes could not be read; with placeholders, the topics are then not
// known, which is a warning. When the brokers cannot be reached, Check
// returns that failure alone. ctx bounds it all.
func Check(ctx context.Context, cfg Config, routes []schema.Message, routesErr error) []check.Result {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return []check.Result{check.Failure("kafka config", err.Error(), "Correct the Kafka flags of walrelay.")}
	}
	ownTransport := cfg.Transport == nil
	if ownTransport {
		t := newTransport(cfg)
		defer t.CloseIdleConnections()
		cfg.Transport = t
	}
	if err := Ping(ctx, cfg); err != nil {
		return []check.Result{check.Failure("kafka reachable", err.Error(), reachFix(err))}
	}
	c := &kafkaChecker{ctx: ctx, bootstrap: strings.Join(cfg.Brokers, ","),
		client: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: cfg.Transport, Timeout: cfg.WriteTimeout}}
	topics, known, topicsResult := tablesTopics(cfg, routes, routesErr)
	// The transport answers from the cluster layout it read for Ping: this
	// asks for no creation, and a missing topic reads as unknown.
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return []check.Result{check.Failure("kafka reachable", err.Error(),
			"Check that the brokers run and accept this client (listeners, advertised.listeners, firewall).")}
	}
	c.add(check.Pass("kafka reachable", fmt.Sprintf("%s answer; the cluster has %d broker(s)", strings.Join(cfg.Brokers, ","), len(md.Brokers))))
	if ownTransport {
		c.add(securityResult(cfg.TLS, cfg.SASL))
	}
	c.add(c.idempotenceResult(cfg))
	c.add(topicsResult)
	if known {
		c.readBroker(md.Controller.ID)
		c.checkTopics(md)
	}
	return c.results
}

// idempotenceWait bounds the asking again of idempotenceResult.
const idempotenceWait = 5 * time.Second

// idempotenceResult is the "kafka idempotence" check: whether the brokers
// grant the idempotent producer (DECISIONS 49), asked as the sink asks, with
// an InitProducerId request (which hands out a producer id and changes
// nothing else). A refusal is a warning: the sink then produces without
// it, and a broker fault may leave duplicates.
func (c *kafkaChecker) idempotenceResult(cfg Config) check.Result {
	const name = "kafka idempotence"
	if cfg.NoIdempotence {
		return check.Pass(name, "off, as configured ("+SettingIdempotence+"=false): a retry after a broker fault may write a batch twice")
	}
	var res *kafka.InitProducerIDResponse
	var err error
	// A broker still loading its transaction state answers that it is
	// (COORDINATOR_LOAD_IN_PROGRESS, just after it started): asked again,
	// for up to idempotenceWait, as the sink asks again.
	for deadline := time.Now().Add(idempotenceWait); ; {
		res, err = c.client.InitProducerID(c.ctx, &kafka.InitProducerIDRequest{TransactionTimeoutMs: math.MaxInt32, ProducerID: -1, ProducerEpoch: -1})
		if err == nil {
			err = res.Error
		}
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || !kerr.Temporary() || time.Now().After(deadline) || backoff.Sleep(c.ctx, 250*time.Millisecond) != nil {
			break
		}
	}
	switch {
	case err == nil:
		return check.Pass(name, fmt.Sprintf("granted (producer id %d): a batch retried after a broker fault is written once", res.Producer.ProducerID))
	case refusesIdempotence(err) || errors.Is(err, kafka.UnsupportedVersion):
		return check.Warning(name, "refused ("+err.Error()+"): walrelay produces without it, and a retry after a broker fault may write a batch twice",
			"Since Kafka 2.8 the right to produce to a topic (WRITE) includes it (KIP-679); on older brokers grant IDEMPOTENT_WRITE on the cluster: kafka-acls.sh --bootstrap-server "+c.bootstrap+
				" --add --allow-principal User:<walrelay's user> --operation IdempotentWrite --cluster. Amazon MSK with IAM: allow kafka-cluster:WriteDataIdempotently.")
	}
	return check.Warning(name, "could not ask for a producer id ("+err.Error()+"): walrelay asks again when it starts, and produces without it if refused",
		"Check that the brokers run and that walrelay's user may write to its topics.")
}

// securityResult is the "kafka tls" check of the transport the sink makes
// with tc and mech: ok with TLS (which always verifies the brokers'
// certificates), a warning without, saying what travels in clear text.
func securityResult(tc *tls.Config, mech sasl.Mechanism) check.Result {
	const name = "kafka tls"
	auth := "no SASL"
	if mech != nil {
		auth = "SASL " + mech.Name()
	}
	if tc != nil {
		found := "TLS, the brokers' certificates verified against the system's roots"
		if tc.RootCAs != nil {
			found = "TLS, the brokers' certificates verified against the given CAs"
		}
		if tc.ServerName != "" {
			found += " for the name " + tc.ServerName
		}
		if len(tc.Certificates) > 0 {
			found += "; a client certificate"
		}
		return check.Pass(name, found+"; "+auth)
	}
	found := "no TLS: messages travel unencrypted; " + auth
	if mech != nil && mech.Name() == "PLAIN" {
		found += ", whose credentials travel in clear text"
	}
	return check.Warning(name, found,
		"Use a TLS listener of the brokers (SSL or SASL_SSL) and set "+SettingTLS+"; for brokers whose certificates a CA of your own signed, "+SettingTLSTrust+".")
}

// reachFix is the fix for brokers that Ping could not use.
func reachFix(err error) string {
	switch {
	case isAuthError(err):
		return "Check " + SettingSASL + " (the mechanism, the user and the password) against the users the brokers' listener knows."
	case isTLSError(err):
		return "Check " + SettingTLSTrust + " (the CA that signed the brokers' certificates, a name in their certificates) and, for listeners that require one, the client certificate (" + SettingClientCert + ")."
	}
	return "Check " + SettingBrokers + " and that the brokers run and accept this client (listeners, advertised.listeners, TLS and SASL settings, firewall)."
}

// kafkaChecker runs the checks of Check and collects their results.
type kafkaChecker struct {
	ctx     context.Context
	client  *kafka.Client
	results []check.Result
	// bootstrap is the brokers as the fixes' commands name them
	// (--bootstrap-server).
	bootstrap string

	// broker is what one broker says of the settings above; brokerErr why
	// it could not say.
	broker    map[string]string
	brokerErr error
}

func (c *kafkaChecker) add(r check.Result) { c.results = append(c.results, r) }

// hasPlaceholders reports whether template names topics per message.
func hasPlaceholders(template string) bool {
	return strings.Contains(template, "{aggregate_type}") || strings.Contains(template, "{type}")
}

// wantedTopics returns the sorted topics walrelay will write, whether they
// are known at all, and the result that says so.
// tablesTopics is wantedTopics of each outbox table (schema.Message.Table
// of the routes), by its own template, in one result: the topics of all
// that are known, and a warning when one table's cannot be.
func tablesTopics(cfg Config, routes []schema.Message, routesErr error) ([]string, bool, check.Result) {
	if len(cfg.tables) <= 1 {
		return wantedTopics(cfg.TopicTemplate, routes, routesErr)
	}
	var topics, found []string
	var warn *check.Result
	for i, t := range cfg.tables {
		var mine []schema.Message
		for _, m := range routes {
			if m.Table == i {
				mine = append(mine, m)
			}
		}
		ts, known, res := wantedTopics(t.TopicTemplate, mine, routesErr)
		found = append(found, fmt.Sprintf("table %d: %s", i+1, res.Found))
		if !known && warn == nil {
			warn = &res
		}
		topics = append(topics, ts...)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if warn != nil {
		return topics, len(topics) > 0, check.Warning("topics", strings.Join(found, "; "), warn.Fix)
	}
	return topics, true, check.Pass("topics", strings.Join(found, "; "))
}

func wantedTopics(template string, routes []schema.Message, routesErr error) ([]string, bool, check.Result) {
	placeholders := hasPlaceholders(template)
	switch {
	case placeholders && routesErr != nil:
		return nil, false, check.Warning("topics",
			fmt.Sprintf("template %q has placeholders and the outbox rows could not be read (%v): topics cannot be known", template, routesErr),
			"Make sure a topic exists for every aggregate type and type the application writes, as the template names them.")
	case placeholders && len(routes) == 0:
		return nil, false, check.Warning("topics",
			fmt.Sprintf("template %q has placeholders and the outbox table has no rows: topics cannot be known yet", template),
			"Make sure a topic exists for every aggregate type and type the application will write, as the template names them.")
	}
	var topics []string
	if !placeholders {
		topics = append(topics, template)
	}
	for i := range routes {
		topics = append(topics, topicFor(template, &routes[i]))
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	found := fmt.Sprintf("%d from template %q", len(topics), template)
	if routesErr == nil {
		found += fmt.Sprintf(" and %d distinct routes of the latest outbox rows", len(routes))
	}
	return topics, true, check.Pass("topics", found+": "+strings.Join(topics, ", "))
}

// readBroker reads the broker settings the checks need from broker id.
func (c *kafkaChecker) readBroker(id int) {
	res, err := c.client.DescribeConfigs(c.ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker,
		ResourceName: strconv.Itoa(id),
		ConfigNames:  []string{configAutoCreate, configMinISR, configUnclean, configDefaultRF, configNumPartitions},
	}}})
	if err == nil && len(res.Resources) != 1 {
		err = fmt.Errorf("got %d resources in the answer; want 1", len(res.Resources))
	}
	if err == nil {
		err = res.Resources[0].Error
	}
	if err != nil {
		c.brokerErr = fmt.Errorf("describe the configuration of broker %d: %w", id, err)
		return
	}
	c.broker = make(map[string]string)
	for _, e := range res.Resources[0].ConfigEntries {
		c.broker[e.ConfigName] = e.ConfigValue
	}
}

// checkTopics adds the results of every topic in md.
func (c *kafkaChecker) checkTopics(md *kafka.MetadataResponse) {
	var present []kafka.Topic
	for _, t := range md.Topics {
		if c.topicPresent(t) {
			present = append(present, t)
		}
	}
	if len(present) == 0 {
		return
	}
	settings, err := c.readTopicSettings(present)
	for _, t := range present {
		c.add(c.replicationResult(t, len(md.Brokers)))
		c.add(c.minISRResult(t, settings[t.Name][configMinISR], err))
		c.add(c.uncleanResult(t, settings[t.Name][configUnclean], err))
		if r, refused := c.readResult(t); refused {
			c.add(r)
		}
	}
}

// readResult warns, with refused set, when walrelay may not read topic t,
// as it does after a restart to skip what the partitions already hold
// (--resume-from-kafka, DECISIONS 47): a Fetch at the end of one partition,
// which Kafka authorizes as any read. Nothing is lost without it, but each
// restart publishes again what the slot had not confirmed. A topic walrelay
// may read adds no line: the topic's other lines say it is there.
func (c *kafkaChecker) readResult(t kafka.Topic) (r check.Result, refused bool) {
	if len(t.Partitions) == 0 {
		return check.Result{}, false
	}
	tails := &kafkaTails{client: c.client}
	err := askAgain(c.ctx, askWithin, isTemporary, func() error { return tails.readable(c.ctx, t.Name, t.Partitions[0].ID) })
	name := "topic " + t.Name + " read"
	switch {
	case err == nil:
		return check.Result{}, false
	case errors.Is(err, kafka.TopicAuthorizationFailed):
		return check.Warning(name, "walrelay may not read it ("+err.Error()+"): a restart cannot see what the partitions hold and publishes again what the slot had not confirmed (duplicates)",
			"Allow walrelay's principal to Read the topic (kafka-acls.sh --add --operation Read), or run with --resume-from-kafka=false."), true
	default:
		return check.Warning(name, "could not read its end ("+err.Error()+"): a restart then publishes again what the slot had not confirmed (duplicates)",
			"Fix what the broker reports for this topic."), true
	}
}

// topicPresent adds the result of topic t's presence and reports it.
func (c *kafkaChecker) topicPresent(t kafka.Topic) bool {
	name := "topic " + t.Name
	if err := validateTopic(t.Name); err != nil {
		c.add(check.Failure(name, err.Error(), "Correct the topic template or the rows' topic column: Kafka refuses this name."))
		return false
	}
	switch {
	case t.Error == nil:
		c.add(check.Pass(name, fmt.Sprintf("present, %d partition(s)", len(t.Partitions))))
		return true
	case errors.Is(t.Error, kafka.UnknownTopicOrPartition):
		c.add(c.missingResult(t.Name))
	case errors.Is(t.Error, kafka.TopicAuthorizationFailed):
		c.add(check.Failure(name, "not authorized: "+t.Error.Error(), "Allow walrelay's principal to Describe and Write the topic."))
	default:
		c.add(check.Failure(name, "the broker answered: "+t.Error.Error(), "Fix what the broker reports for this topic."))
	}
	return false
}

// missingResult fails a missing topic unless the broker creates it on first
// use, which only warns: it gets the broker's defaults, not a chosen layout.
func (c *kafkaChecker) missingResult(topic string) check.Result {
	name := "topic " + topic
	create := fmt.Sprintf("Create it: kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions N --replication-factor %d.", c.bootstrap, topic, wantReplicationFactor)
	if c.brokerErr != nil {
		return check.Failure(name, fmt.Sprintf("missing, and %s is unknown (%v)", configAutoCreate, c.brokerErr), create)
	}
	if c.broker[configAutoCreate] != "true" {
		return check.Failure(name, fmt.Sprintf("missing, and the broker does not create topics (%s=%s)", configAutoCreate, c.broker[configAutoCreate]), create)
	}
	return check.Warning(name, fmt.Sprintf("missing; the broker creates it on first use (%s=true) with %s=%s and %s=%s",
		configAutoCreate, configNumPartitions, c.broker[configNumPartitions], configDefaultRF, c.broker[configDefaultRF]),
		"Create it yourself with the partitions and replication factor it needs: its partition count cannot change later without moving keys.")
}

// replicationResult warns below three replicas of any partition, on a
// cluster of brokers brokers (as its metadata lists them: a broker that is
// down is not listed, so such a cluster reads as smaller; either way the
// verdict is a warning). Where the cluster has three brokers or more, the
// fix is to raise the replication factor; below three it cannot be raised
// that far, and the warning says so instead of offering that fix.
func (c *kafkaChecker) replicationResult(t kafka.Topic, brokers int) check.Result {
	name := "topic " + t.Name + " replication factor"
	rf := replicationFactor(t)
	switch {
	case rf >= wantReplicationFactor:
		return check.Pass(name, strconv.Itoa(rf))
	case brokers < wantReplicationFactor:
		return check.Warning(name,
			fmt.Sprintf("%d, on a cluster of %d broker(s), which cannot keep %d replicas of a partition: losing one broker can lose acknowledged messages", rf, brokers, wantReplicationFactor),
			fmt.Sprintf("For messages that must not be lost, run Kafka with at least %d brokers, then raise the topic's replication factor to %d (kafka-reassign-partitions.sh).", wantReplicationFactor, wantReplicationFactor))
	}
	return check.Warning(name, fmt.Sprintf("%d: losing a broker can lose acknowledged messages", rf),
		fmt.Sprintf("Raise it to %d: kafka-reassign-partitions.sh --bootstrap-server %s --reassignment-json-file FILE --execute, with FILE listing %d replicas for each partition of %s.",
			wantReplicationFactor, c.bootstrap, wantReplicationFactor, t.Name))
}

// replicationFactor is the fewest replicas of any partition of t.
func replicationFactor(t kafka.Topic) int {
	rf := -1
	for _, p := range t.Partitions {
		if rf < 0 || len(p.Replicas) < rf {
			rf = len(p.Replicas)
		}
	}
	return max(rf, 0)
}

// fewestInSync is the fewest in-sync replicas of any partition of t.
func fewestInSync(t kafka.Topic) int {
	isr := -1
	for _, p := range t.Partitions {
		if isr < 0 || len(p.Isr) < isr {
			isr = len(p.Isr)
		}
	}
	return max(isr, 0)
}

// setting is one configuration entry of a topic as DescribeConfigs answers
// it: its value, and whether the topic sets it itself (else it is the
// broker's default). The zero setting is one that could not be read.
type setting struct {
	value    string
	ownValue bool
}

// String is the value and where it comes from.
func (s setting) String() string {
	if s.ownValue {
		return s.value + " (set on the topic)"
	}
	return s.value + " (broker default)"
}

// configSourceTopic is DescribeConfigs' ConfigSource of a value set on the
// topic itself (TOPIC_CONFIG).
const configSourceTopic = 1

// readTopicSettings reads min.insync.replicas and
// unclean.leader.election.enable of topics in one DescribeConfigs request,
// by topic and setting name. A setting missing from the answer has no
// readable value of the topic's: the broker's default applies.
func (c *kafkaChecker) readTopicSettings(topics []kafka.Topic) (map[string]map[string]setting, error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t.Name, ConfigNames: []string{configMinISR, configUnclean}})
	}
	res, err := c.client.DescribeConfigs(c.ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe the configuration of the topics: %w", err)
	}
	out := make(map[string]map[string]setting)
	for _, r := range res.Resources {
		if r.Error != nil {
			continue
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != configMinISR && e.ConfigName != configUnclean {
				continue
			}
			if out[r.ResourceName] == nil {
				out[r.ResourceName] = make(map[string]setting)
			}
			out[r.ResourceName][e.ConfigName] = setting{value: e.ConfigValue, ownValue: e.ConfigSource == configSourceTopic}
		}
	}
	return out, nil
}

// effective is setting name of a topic: set, as readTopicSettings read it,
// else the broker's value; false when neither could be read.
func (c *kafkaChecker) effective(name string, set setting) (setting, bool) {
	if set != (setting{}) {
		return set, true
	}
	v, ok := c.broker[name]
	if c.brokerErr != nil || !ok || v == "" {
		return setting{}, false
	}
	return setting{value: v}, true
}

// unknownResult warns that check name's setting could not be read: not of
// the topic (readErr, nil when the broker answered without it) nor of the
// broker (c.brokerErr).
func (c *kafkaChecker) unknownResult(name string, readErr error) check.Result {
	return check.Warning(name, fmt.Sprintf("unknown: neither the topic's nor the broker's value could be read (%v; %v)", readErr, c.brokerErr),
		"Allow walrelay's principal to DescribeConfigs on the topic and the cluster, then check again.")
}

// minISRResult judges min.insync.replicas of t: set (from
// readTopicSettings, whose error readErr is), else the broker's default.
func (c *kafkaChecker) minISRResult(t kafka.Topic, set setting, readErr error) check.Result {
	name := "topic " + t.Name + " " + configMinISR
	set, ok := c.effective(configMinISR, set)
	n, err := strconv.Atoi(set.value)
	if !ok || err != nil {
		return c.unknownResult(name, readErr)
	}
	rf, inSync := replicationFactor(t), fewestInSync(t)
	found := set.String()
	switch {
	case n > rf:
		return check.Failure(name, fmt.Sprintf("%s, above the replication factor %d: every write with acks=all fails", found, rf),
			"Lower min.insync.replicas to at most the replication factor, or add replicas.")
	case inSync < n:
		return check.Failure(name, fmt.Sprintf("%s, but a partition has only %d replicas in sync: writes with acks=all fail now", found, inSync),
			"Bring the out-of-sync replicas back (look at the brokers that host them).")
	case n < wantMinISR:
		return check.Warning(name, found+": an acknowledged message may be on one broker only",
			fmt.Sprintf("With a replication factor of %d, set min.insync.replicas=%d on the topic: kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=%d.",
				wantReplicationFactor, wantMinISR, c.bootstrap, t.Name, wantMinISR))
	}
	return check.Pass(name, found)
}

// uncleanResult judges unclean.leader.election.enable of t: set (from
// readTopicSettings, whose error readErr is), else the broker's default.
// When it is true and every in-sync replica of a partition is lost, a
// replica that was not in sync may become the leader, and the messages it
// lacks, acknowledged to walrelay, are gone: the slot has moved past them.
func (c *kafkaChecker) uncleanResult(t kafka.Topic, set setting, readErr error) check.Result {
	name := "topic " + t.Name + " " + configUnclean
	set, ok := c.effective(configUnclean, set)
	enabled, err := strconv.ParseBool(set.value)
	if !ok || err != nil {
		return c.unknownResult(name, readErr)
	}
	if !enabled {
		return check.Pass(name, set.String())
	}
	fix := fmt.Sprintf("Turn it off on the topic: kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config %s=false.",
		c.bootstrap, t.Name, configUnclean)
	if !set.ownValue {
		fix += " The brokers' " + configUnclean + "=true applies to every topic that does not set it: turn it off there too."
	}
	return check.Warning(name, set.String()+": a replica that is not in sync can become a partition's leader, and an acknowledged message can be lost", fix)
}
