package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/internal/topics"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

const topicsUsage = `Usage:
  walrelay topics list   [flags]   each topic walrelay published to: the partition count its keys are
                                   routed by, and Kafka's now (a difference holds the topic)
  walrelay topics accept --topic T [--reason R] [flags]
                                   record Kafka's partition count of T as the one its keys are routed
                                   by; a running walrelay resumes publishing to T at its next
                                   partition check (--partition-check-interval, 15s by default)

Run 'walrelay topics list -h' or 'walrelay topics accept -h' for the flags.
Before accepting a grown topic, let its consumers catch up on what walrelay published
to it before the change: see docs/RUNBOOK.md, WalrelayTopicPartitionsChanged.
`

// topicsTimeout bounds `walrelay topics`, PostgreSQL and Kafka together.
const topicsTimeout = 30 * time.Second

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topicsUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list", "accept":
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, topicsUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "walrelay topics: unknown command %q\n\n%s", sub, topicsUsage)
		return errUsage
	}
	o, s, err := parseOptions("topics "+sub, rest, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if sub == "accept" && strings.TrimSpace(o.Topics.Topic) == "" {
		fmt.Fprint(stderr, "walrelay topics accept: --topic is required\nRun 'walrelay topics accept -h' for its flags.\n")
		return errUsage
	}
	c, err := o.resolve(s)
	if err == nil && sub == "accept" {
		if terr := sink.ValidateTopic(c.Topics.Topic); terr != nil {
			err = fmt.Errorf("--topic %q: %w", c.Topics.Topic, terr)
		}
	}
	if err != nil {
		return asConfigError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, topicsTimeout)
	defer cancel()
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := topics.New(conn, c.Schema.TopicsTable())
	if err != nil {
		return err
	}
	if err := st.Ready(ctx); err != nil {
		return err
	}
	if sub == "accept" {
		return topicsAccept(ctx, c, st, stdout)
	}
	return topicsList(ctx, c, st, stdout)
}

// topicsAccept records Kafka's partition count of the topic, saying what
// it was before.
func topicsAccept(ctx context.Context, c config, st *topics.Store, stdout io.Writer) error {
	topic := c.Topics.Topic
	counts, errs := sink.TopicPartitions(ctx, c.Sink, topic)
	if errs[0] != nil {
		return errs[0]
	}
	n := counts[0]
	before, found, err := st.Get(ctx, topic)
	if err != nil {
		return err
	}
	by := "walrelay topics accept"
	if r := strings.TrimSpace(c.Topics.Reason); r != "" {
		by += ": " + r
	}
	if err := st.Accept(ctx, topic, n, by); err != nil {
		return err
	}
	switch {
	case !found:
		fmt.Fprintf(stdout, "topic %s: recorded %d partitions (none was recorded: walrelay had not published to it)\n", topic, n)
	case before.Partitions == n:
		fmt.Fprintf(stdout, "topic %s: %d partitions, as recorded already (nothing changed)\n", topic, n)
	default:
		fmt.Fprintf(stdout, "topic %s: recorded %d partitions, was %d (since %s); a running walrelay publishes to it again, by %d, at its next partition check (--partition-check-interval, 15s by default)\n",
			topic, n, before.Partitions, before.RecordedAt.UTC().Format(time.RFC3339), n)
	}
	return nil
}

// topicRow is one line of `walrelay topics list`.
type topicRow struct {
	Topic           string    `json:"topic"`
	Partitions      int       `json:"partitions"`
	KafkaPartitions int       `json:"kafka_partitions"` // 0 when Kafka could not say
	KafkaError      string    `json:"kafka_error,omitempty"`
	Held            bool      `json:"held"`
	RecordedAt      time.Time `json:"recorded_at"`
	RecordedBy      string    `json:"recorded_by"`
}

// layoutRows reads each recorded topic and Kafka's count of it now.
func layoutRows(ctx context.Context, c config, st *topics.Store) ([]topicRow, error) {
	all, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, l := range all {
		names[i] = l.Topic
	}
	counts, errs := sink.TopicPartitions(ctx, c.Sink, names...)
	rows := make([]topicRow, len(all))
	for i, l := range all {
		r := topicRow{Topic: l.Topic, Partitions: l.Partitions, KafkaPartitions: counts[i], RecordedAt: l.RecordedAt.UTC(), RecordedBy: l.RecordedBy}
		if errs[i] != nil {
			r.KafkaPartitions, r.KafkaError = 0, errs[i].Error()
		}
		r.Held = r.KafkaPartitions != 0 && r.KafkaPartitions != r.Partitions
		rows[i] = r
	}
	return rows, nil
}

// partitionsResult is check's line on the recorded partition counts: a
// failure names each topic walrelay holds because Kafka's count changed.
func partitionsResult(ctx context.Context, c config) check.Result {
	const name = "topic partitions"
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return check.Warning(name, "not read: "+oneLine(err).Error(), "See the PostgreSQL checks above.")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := topics.New(conn, c.Schema.TopicsTable())
	var rows []topicRow
	if err == nil {
		if err = st.Ready(ctx); err == nil {
			rows, err = layoutRows(ctx, c, st)
		}
	}
	if err != nil {
		return check.Warning(name, "not read: "+err.Error(), "See the topics table check above.")
	}
	var held []string
	for _, r := range rows {
		if r.Held {
			held = append(held, fmt.Sprintf("%s (recorded %d, Kafka %d)", r.Topic, r.Partitions, r.KafkaPartitions))
		}
	}
	if len(held) > 0 {
		return check.Failure(name, "walrelay publishes nothing to "+strings.Join(held, ", ")+": the partition count changed",
			"Let the topic's consumers catch up, then run walrelay topics accept --topic T for each (docs/RUNBOOK.md, WalrelayTopicPartitionsChanged).")
	}
	return check.Pass(name, fmt.Sprintf("%d recorded, each as Kafka has it", len(rows)))
}

// topicsList prints each recorded topic beside Kafka's count now.
func topicsList(ctx context.Context, c config, st *topics.Store, stdout io.Writer) error {
	rows, err := layoutRows(ctx, c, st)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintf(stdout, "no topic recorded in %s: walrelay records a topic when it first publishes to it\n", st.Table())
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITIONS\tKAFKA\tSTATE\tRECORDED\tBY")
	for _, r := range rows {
		kafka, state := fmt.Sprint(r.KafkaPartitions), "ok"
		switch {
		case r.KafkaError != "":
			kafka, state = "?", "kafka: "+r.KafkaError
		case r.Held:
			state = "held: run walrelay topics accept --topic " + r.Topic
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Topic, r.Partitions, kafka, state, r.RecordedAt.Format(time.RFC3339), r.RecordedBy)
	}
	return w.Flush()
}
