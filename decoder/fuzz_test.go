package decoder

import (
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
)

// FuzzDecode proves the decoder never panics: a decoder inside a
// transaction that knows the outbox relation decodes the fuzzed bytes
// twice (the second time in whatever state the first left), then a valid
// outbox row (which meets whatever relation the fuzzed bytes announced).
func FuzzDecode(f *testing.F) {
	row := outboxRow()
	row["headers"] = text(`{"k\"ey": "v\u00e9\ud83d\ude00", "n": [1, {"x": "}"}], "a": "b"}`)
	seeds := [][]byte{
		pgoutputtest.Begin(finalLSN, commitTime, xid),
		pgoutputtest.Commit(finalLSN, endLSN, commitTime),
		outboxRelation(),
		outboxInsert(),
		pgoutputtest.Insert(outboxRel, rowFor(outboxColumns(), row)),
		pgoutputtest.Relation(outboxRel, "public", "outbox_messages", withType("payload", oidBytea)(outboxColumns())),
		pgoutputtest.Relation(outboxRel, "public", "outbox_messages", without("topic", "headers")(outboxColumns())),
		pgoutputtest.Relation(otherRel, "public", "accounts", []pgoutputtest.Column{{Name: "id", OID: oidInt8}}),
		pgoutputtest.Insert(otherRel, []pgoutputtest.Cell{text("1")}),
		{'Y'}, {'Z'}, {},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := primed(t, outboxColumns())
		for range 2 {
			ev, err := d.Decode(data)
			checkEvent(t, ev, err)
		}
		ev, err := d.Decode(outboxInsert())
		checkEvent(t, ev, err)
	})
}

// checkEvent checks the promises of Decode that hold for any input.
func checkEvent(t *testing.T, ev Event, err error) {
	t.Helper()
	if err != nil {
		if ev.Kind != KindSkip || ev.Message != nil {
			t.Fatalf("error %v came with event %+v", err, ev)
		}
		return
	}
	if (ev.Kind == KindMessage) != (ev.Message != nil) {
		t.Fatalf("event %v has message %v", ev.Kind, ev.Message)
	}
	if m := ev.Message; m != nil && (m.AggregateID == "" || m.Type == "" || m.Payload == nil || m.ContentType == "") {
		t.Fatalf("message lacks a promised field: %+v", m)
	}
}
