package topics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/internal/texttable"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
)

// AcceptFromKafka is `walrelay topics accept`: it records Kafka's
// partition count of topic, by "walrelay topics accept" with reason when
// one is given, and writes to w what it was before.
func AcceptFromKafka(ctx context.Context, st *Store, kafka sink.Config, topic, reason string, w io.Writer) error {
	counts, errs := sink.TopicPartitions(ctx, kafka, topic)
	if errs[0] != nil {
		return errs[0]
	}
	n := counts[0]
	before, found, err := st.Get(ctx, topic)
	if err != nil {
		return err
	}
	by := "walrelay topics accept"
	if r := strings.TrimSpace(reason); r != "" {
		by += ": " + r
	}
	if err := st.Accept(ctx, topic, n, by); err != nil {
		return err
	}
	_, err = io.WriteString(w, acceptLine(topic, n, before, found))
	return err
}

// acceptLine says what accepting n partitions of topic changed, before
// being its row (found false: none).
func acceptLine(topic string, n int, before Layout, found bool) string {
	switch {
	case !found:
		return fmt.Sprintf("topic %s: recorded %d partitions (none was recorded: walrelay had not published to it)\n", topic, n)
	case before.Partitions == n:
		return fmt.Sprintf("topic %s: %d partitions, as recorded already (nothing changed)\n", topic, n)
	}
	return fmt.Sprintf("topic %s: recorded %d partitions, was %d (since %s); a running walrelay publishes to it again, by %d, at its next partition check (--partition-check-interval, 15s by default)\n",
		topic, n, before.Partitions, before.RecordedAt.UTC().Format(time.RFC3339), n)
}

// row is one line of `walrelay topics list`.
type row struct {
	Topic           string    `json:"topic"`
	Partitions      int       `json:"partitions"`
	KafkaPartitions int       `json:"kafka_partitions"` // 0 when Kafka could not say
	KafkaError      string    `json:"kafka_error,omitempty"`
	Held            bool      `json:"held"`
	RecordedAt      time.Time `json:"recorded_at"`
	RecordedBy      string    `json:"recorded_by"`
}

// rows reads each recorded topic and Kafka's count of it now.
func rows(ctx context.Context, st *Store, kafka sink.Config) ([]row, error) {
	all, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, l := range all {
		names[i] = l.Topic
	}
	counts, errs := sink.TopicPartitions(ctx, kafka, names...)
	out := make([]row, len(all))
	for i, l := range all {
		r := row{Topic: l.Topic, Partitions: l.Partitions, KafkaPartitions: counts[i], RecordedAt: l.RecordedAt.UTC(), RecordedBy: l.RecordedBy}
		if errs[i] != nil {
			r.KafkaPartitions, r.KafkaError = 0, errs[i].Error()
		}
		r.Held = r.KafkaPartitions != 0 && r.KafkaPartitions != r.Partitions
		out[i] = r
	}
	return out, nil
}

// WriteList is `walrelay topics list`: it writes to w each topic recorded in
// st beside Kafka's count now, as JSON when asJSON, else as a table.
func WriteList(ctx context.Context, st *Store, kafka sink.Config, w io.Writer, asJSON bool) error {
	rs, err := rows(ctx, st, kafka)
	if err != nil {
		return err
	}
	return render(w, rs, st.Table(), asJSON)
}

// render writes rs, the rows of the topics table named table.
func render(w io.Writer, rs []row, table string, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	}
	if len(rs) == 0 {
		_, err := fmt.Fprintf(w, "no topic recorded in %s: walrelay records a topic when it first publishes to it\n", table)
		return err
	}
	rows := [][]string{{"TOPIC", "PARTITIONS", "KAFKA", "STATE", "RECORDED", "BY"}}
	for _, r := range rs {
		kafka, state := fmt.Sprint(r.KafkaPartitions), "ok"
		switch {
		case r.KafkaError != "":
			kafka, state = "?", "kafka: "+r.KafkaError
		case r.Held:
			state = "held: run walrelay topics accept --topic " + r.Topic
		}
		rows = append(rows, []string{r.Topic, fmt.Sprint(r.Partitions), kafka, state, r.RecordedAt.Format(time.RFC3339), r.RecordedBy})
	}
	return texttable.Write(w, rows)
}

// PartitionsCheck names CheckPartitions's line of `walrelay check`, for a
// caller that could not connect and reports that under the same name.
const PartitionsCheck = "topic partitions"

// CheckPartitions is check's line on the partition counts recorded in the
// topics table t: a failure names each topic walrelay holds because
// Kafka's count changed.
func CheckPartitions(ctx context.Context, db DB, t schema.Table, kafka sink.Config) check.Result {
	st, err := Open(ctx, db, t)
	var rs []row
	if err == nil {
		rs, err = rows(ctx, st, kafka)
	}
	if err != nil {
		return check.Warning(PartitionsCheck, "not read: "+err.Error(), "See the topics table check above.")
	}
	return partitionsResult(rs)
}

// partitionsResult is CheckPartitions's verdict on rows read.
func partitionsResult(rs []row) check.Result {
	var held []string
	for _, r := range rs {
		if r.Held {
			held = append(held, fmt.Sprintf("%s (recorded %d, Kafka %d)", r.Topic, r.Partitions, r.KafkaPartitions))
		}
	}
	if len(held) > 0 {
		return check.Failure(PartitionsCheck, "walrelay publishes nothing to "+strings.Join(held, ", ")+": the partition count changed",
			"Let the topic's consumers catch up, then run walrelay topics accept --topic T for each (docs/RUNBOOK.md, WalrelayTopicPartitionsChanged).")
	}
	return check.Pass(PartitionsCheck, fmt.Sprintf("%d recorded, each as Kafka has it", len(rs)))
}
