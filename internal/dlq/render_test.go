package dlq

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
)

func TestAgeAndShorten(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 12 * time.Minute: "12m",
		3*time.Hour + 5*time.Minute: "3h05m", 52 * time.Hour: "2d04h",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q; want %q", d, got, want)
		}
	}
	if got := shorten("a\nb  c", 10); got != "a b c" {
		t.Errorf("shorten = %q; want one line", got)
	}
	if got := shorten(strings.Repeat("é", 70), 60); len([]rune(got)) != 60 || !strings.HasSuffix(got, "...") {
		t.Errorf("shorten of 70 runes = %q; want 60 runes ending in ...", got)
	}
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// entries are a parked message, one blocked behind it, and a row that
// could not be decoded.
func entries() []Entry {
	first, blocker := schema.MessageID("0001"), schema.MessageID("0001")
	return []Entry{
		{Position: schema.Position{CommitLSN: 0x16B3748, Seq: 2}, MessageID: &first, Aggregate: schema.Aggregate{Type: "order", ID: "42"},
			Type: "placed", Reason: "message too large:\n1200000 bytes", Status: Parked, ParkedAt: now.Add(-90 * time.Minute)},
		{Position: schema.Position{CommitLSN: 0x16B3800, Seq: 0}, Aggregate: schema.Aggregate{Type: "order", ID: "42"},
			Reason: "blocked by 0001", BlockedBy: &blocker, Status: Parked, ParkedAt: now.Add(-30 * time.Second)},
		{Position: schema.Position{CommitLSN: 0x1, Seq: 0}, Undecodable: true, Reason: strings.Repeat("x", 70), Status: Parked, ParkedAt: now},
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, entries(), now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"POSITION     MESSAGE_ID  AGGREGATE  TYPE    PARKED     REASON                                                        BLOCKED_BY\n" +
		"0/16B3748#2  0001        order/42   placed  1h30m ago  message too large: 1200000 bytes                              -\n" +
		"0/16B3800#0  -           order/42   -       30s ago    blocked by 0001                                               0001\n" +
		"0/1#0        -           -/-        -       0s ago     " + strings.Repeat("x", 57) + "...  -\n"
	if got := b.String(); got != want {
		t.Errorf("WriteTable:\ngot\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	if err := WriteTable(&b, nil, now); err != nil || b.String() != "no dead letters\n" {
		t.Errorf("WriteTable of none: got %q, %v; want no dead letters", b.String(), err)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, nil); err != nil || b.String() != "[]\n" {
		t.Errorf("WriteJSON of none: got %q, %v; want []", b.String(), err)
	}
	b.Reset()
	es := entries()
	size := 1200000
	es[0].PayloadBytes, es[0].TargetTopic = &size, "orders"
	if err := WriteJSON(&b, es[:1]); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b.Bytes()); err != nil {
		t.Fatalf("WriteJSON wrote invalid JSON %q: %v", b.String(), err)
	}
	want := `[{"position":"0/16B3748#2","commit_lsn":"0/16B3748","seq":2,"message_id":"0001","aggregate_type":"order",` +
		`"aggregate_id":"42","aggregate_version":null,"type":"placed","topic":null,"target_topic":"orders",` +
		`"payload_bytes":1200000,"content_type":null,"undecodable":false,"occurred_at":null,"committed_at":null,` +
		`"reason":"message too large:\n1200000 bytes","blocked_by":null,"status":"parked","parked_at":"2026-03-01T10:30:00.000Z",` +
		`"retries":0,"last_error":null,"discarded_at":null,"discard_reason":null}]`
	if got := compact.String(); got != want {
		t.Errorf("WriteJSON:\ngot  %s\nwant %s", got, want)
	}
}

func TestResultWriteText(t *testing.T) {
	id := schema.MessageID("0001")
	res := Result{
		Published: []Item{{Position: schema.Position{CommitLSN: 0x10, Seq: 1}, MessageID: &id, Aggregate: schema.Aggregate{Type: "order", ID: "1"}, Type: "placed"}},
		Left:      []Item{{Position: schema.Position{CommitLSN: 0x20}, Why: "cannot be retried"}},
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "published  0/10#1  0001  order/1  placed\n" +
		"left       0/20#0  -  -/-  -: cannot be retried\n" +
		"1 published and removed, 1 left parked\n"
	if got := b.String(); got != want {
		t.Errorf("WriteText:\ngot\n%s\nwant\n%s", got, want)
	}
}

func TestReport(t *testing.T) {
	id := schema.MessageID("0001")
	one, all := Selection{MessageID: &id}, Selection{All: true}
	left := Result{Left: []Item{{Position: schema.Position{CommitLSN: 0x20}, Why: "cannot be retried"}}}
	for _, tc := range []struct {
		name    string
		res     Result
		sel     Selection
		out     string
		wantErr string
	}{
		{"one message, none parked", Result{}, one, "", "no parked message matches message 0001"},
		{"all, none parked", Result{}, all, "no parked messages (all parked messages)\n", ""},
		{"left parked", left, all, "left       0/20#0  -  -/-  -: cannot be retried\n0 published and removed, 1 left parked\n", "1 message left parked"},
		{"published", Result{Published: []Item{{MessageID: &id}}}, one, "published  0/0#0  0001  -/-  -\n1 published and removed, 0 left parked\n", ""},
	} {
		var b bytes.Buffer
		err := tc.res.Report(&b, tc.sel)
		if b.String() != tc.out || (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("%s: got %q, %v; want %q, %q", tc.name, b.String(), err, tc.out, tc.wantErr)
		}
	}
}

func TestWriteDiscarded(t *testing.T) {
	id := schema.MessageID("0001")
	var b bytes.Buffer
	if err := WriteDiscarded(&b, Selection{MessageID: &id}, 0, "duplicate"); err == nil || b.Len() != 0 {
		t.Errorf("one message, none matched: got %q, %v; want nothing written and an error", b.String(), err)
	}
	for n, want := range map[int]string{
		1: "discarded 1 parked message (all parked messages), reason: duplicate\n",
		2: "discarded 2 parked messages (all parked messages), reason: duplicate\n",
		0: "discarded 0 parked messages (all parked messages), reason: duplicate\n",
	} {
		b.Reset()
		if err := WriteDiscarded(&b, Selection{All: true}, n, "duplicate"); err != nil || b.String() != want {
			t.Errorf("%d discarded: got %q, %v; want %q", n, b.String(), err, want)
		}
	}
}
