package harness

import (
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/test/cloudevents"
)

// maxCloudEventErrors bounds the failures CheckCloudEvents reports one by
// one; the rest are counted.
const maxCloudEventErrors = 10

// CheckCloudEvents fails t for each record that the CloudEvents Go SDK
// cannot read as a valid event in the Kafka binary binding, or whose
// event id is not its ce_id header.
func CheckCloudEvents(t testing.TB, recs []kafkatest.Record) {
	t.Helper()
	bad := 0
	for _, r := range recs {
		problem := cloudEventProblem(r)
		if problem == "" {
			continue
		}
		if bad++; bad <= maxCloudEventErrors {
			t.Errorf("record %s/%d@%d: got %s; want a valid CloudEvent", r.Topic, r.Partition, r.Offset, problem)
		}
	}
	if bad > maxCloudEventErrors {
		t.Errorf("%d more records are no valid CloudEvents", bad-maxCloudEventErrors)
	}
}

// cloudEventProblem says what is wrong with r as a CloudEvent; "" when
// nothing is.
func cloudEventProblem(r kafkatest.Record) string {
	hs := make([]cloudevents.Header, 0, len(r.Headers))
	for k, v := range r.Headers {
		hs = append(hs, cloudevents.Header{Key: k, Value: []byte(v)})
	}
	var value []byte
	if r.Payload != nil {
		value = []byte(*r.Payload)
	}
	ev, err := cloudevents.Decode(hs, value)
	switch {
	case err != nil:
		return err.Error()
	case ev.ID() != r.Headers["ce_id"]:
		return fmt.Sprintf("event id %q, ce_id %q", ev.ID(), r.Headers["ce_id"])
	}
	return ""
}
