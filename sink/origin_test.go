package sink

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/schema"
)

// TestStartedSinkMarksRecordsWithTheirWALPosition: a sink told its origin
// puts walrelay_source and walrelay_position on every record, with the
// message's commit LSN and place and the partition count it was routed by;
// a sink never started (recover, replay, dlq retry) puts neither.
func TestStartedSinkMarksRecordsWithTheirWALPosition(t *testing.T) {
	for _, started := range []bool{true, false} {
		var mu sync.Mutex
		got := map[string][]kafka.Header{} // by ce_id
		prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
			for {
				r, err := req.Records.ReadRecord()
				if errors.Is(err, io.EOF) {
					return okResponse(), nil
				}
				if err != nil {
					return nil, err
				}
				mu.Lock()
				for _, h := range r.Headers {
					if h.Key == schema.HeaderID {
						got[string(h.Value)] = r.Headers
					}
				}
				mu.Unlock()
			}
		}}
		h := start(t, testConfig(), prod, fixedPartitions(3))
		if started {
			h.s.Start(Origin{Source: schema.WALSource("7433256101470117656", "shop", "walrelay"), Timeline: 2})
		}
		want := map[string]schema.WALMark{}
		for i := range 4 {
			m := msg(i, []string{"a", "b"}[i%2])
			m.CommitLSN, m.Seq = pglogrepl.LSN(0x16B3748+0x100*(i/2)), uint32(i%2)
			if err := h.s.Publish(context.Background(), m, uint64(i)); err != nil {
				t.Fatal(err)
			}
			want[string(m.ID)] = schema.WALMark{Timeline: 2, Pos: m.Position(), Partitions: 3}
		}
		h.s.Close()
		if err := h.wait(t); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("started=%v: %d records produced, want %d", started, len(got), len(want))
		}
		for id, w := range want {
			var source, position []string
			for _, hd := range got[id] {
				switch hd.Key {
				case schema.HeaderWALSource:
					source = append(source, string(hd.Value))
				case schema.HeaderWALPosition:
					position = append(position, string(hd.Value))
				}
			}
			if !started {
				if source != nil || position != nil {
					t.Errorf("record %s of a sink never started: source %q, position %q, want neither", id, source, position)
				}
				continue
			}
			if len(source) != 1 || source[0] != "7433256101470117656/shop/walrelay" {
				t.Errorf("record %s: walrelay_source %q", id, source)
			}
			if len(position) != 1 {
				t.Fatalf("record %s: walrelay_position %q", id, position)
			}
			mark, err := schema.ParseWALMark(position[0])
			if err != nil || mark != w {
				t.Errorf("record %s: walrelay_position %q = %+v, %v; want %+v", id, position[0], mark, err, w)
			}
		}
	}
}
