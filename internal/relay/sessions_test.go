package relay

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

func testSessions() Sessions {
	table := schema.Table{Schema: "public", Name: "outbox_messages"}
	return Sessions{
		Slot: slot.Config{ConnString: "postgres://127.0.0.1:1/x", Slot: "walrelay", Publication: "walrelay_outbox",
			Table: table, Columns: schema.DefaultColumns()},
		Decoders: []decoder.Config{{Table: table, Columns: schema.DefaultColumns()}},
		Sink:     sink.Config{TopicTemplate: "outbox.{aggregate_type}"},
	}
}

// Each session gets new parts, its publisher the aggregates blocked when
// the session starts, and its acknowledgements reach ack.
func TestSessionsFactory(t *testing.T) {
	s := testSessions()
	loads := 0
	s.Blockers = func(context.Context) ([]schema.Blocker, error) {
		loads++
		return []schema.Blocker{{Aggregate: schema.Aggregate{Type: "order", ID: "order-1"}}}, nil
	}
	var gotCfg sink.Config
	var acked []uint64
	s.NewPublisher = func(cfg sink.Config, _ *zap.Logger, ack func(uint64)) (Publisher, error) {
		gotCfg = cfg
		ack(7)
		return newFakeSink(1), nil
	}
	factory, err := s.Factory(zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	first, err := factory(context.Background(), func(token uint64) { acked = append(acked, token) })
	if err != nil {
		t.Fatal(err)
	}
	if first.Stream == nil || first.Decoder == nil || first.Publisher == nil {
		t.Fatalf("parts %+v; want a stream, a decoder and a publisher", first)
	}
	if len(gotCfg.Blocked) != 1 || gotCfg.Blocked[0].Aggregate.ID != "order-1" || gotCfg.TopicTemplate != "outbox.{aggregate_type}" {
		t.Errorf("publisher config: blocked %+v, template %q; want the loaded blockers and the sink's config", gotCfg.Blocked, gotCfg.TopicTemplate)
	}
	if len(acked) != 1 || acked[0] != 7 {
		t.Errorf("acks: got %v; want [7]", acked)
	}
	second, err := factory(context.Background(), func(uint64) {})
	if err != nil {
		t.Fatal(err)
	}
	if loads != 2 || second.Decoder == first.Decoder || second.Stream == first.Stream {
		t.Errorf("second session: %d loads of the blockers, same decoder %v, same stream %v; want new parts", loads, second.Decoder == first.Decoder, second.Stream == first.Stream)
	}
}

// A failure to load the blockers or to make the publisher fails the
// session; a decoder configuration no session could use fails at once.
func TestSessionsFactoryFailures(t *testing.T) {
	s := testSessions()
	s.Decoders[0].Columns.Payload = ""
	if _, err := s.Factory(zaptest.NewLogger(t), nil); err == nil {
		t.Errorf("Factory with no payload column: got no error; want the decoder's")
	}

	loadErr, pubErr := errors.New("load blockers"), errors.New("new publisher")
	s = testSessions()
	s.Blockers = func(context.Context) ([]schema.Blocker, error) { return nil, loadErr }
	s.NewPublisher = func(sink.Config, *zap.Logger, func(uint64)) (Publisher, error) { return nil, pubErr }
	factory, err := s.Factory(zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := factory(context.Background(), func(uint64) {}); !errors.Is(err, loadErr) {
		t.Errorf("blockers failing: got %v; want %v", err, loadErr)
	}
	s.Blockers = func(context.Context) ([]schema.Blocker, error) { return nil, nil }
	if factory, err = s.Factory(zaptest.NewLogger(t), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := factory(context.Background(), func(uint64) {}); !errors.Is(err, pubErr) {
		t.Errorf("publisher failing: got %v; want %v", err, pubErr)
	}
}
