package backfill

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/schema"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-12-04T08:10:03Z":      time.Date(2026, 12, 4, 8, 10, 3, 0, time.UTC),
		"2026-12-04T10:10:03+02:00": time.Date(2026, 12, 4, 8, 10, 3, 0, time.UTC),
		"90m":                       now.Add(-90 * time.Minute),
	} {
		got, err := ParseWhen("--since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseWhen(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-1h", "2026-12-04 08:10"} {
		if _, err := ParseWhen("--since", bad, now); err == nil || !strings.Contains(err.Error(), "--since is") {
			t.Errorf("ParseWhen(%q) = %v; want an error naming --since", bad, err)
		}
	}
}

// A replayed message carries one walrelay_replay header, replacing the
// row's own of any case, and goes to --to-topic when given.
func TestMarkReplay(t *testing.T) {
	m := &schema.Message{Headers: []schema.Header{{Key: "traceparent", Value: "t"}, {Key: "Walrelay_Replay", Value: "forged"}}}
	markReplay(m, "rebuild", "2026-12-04T09:00:00Z")
	want := []schema.Header{{Key: "traceparent", Value: "t"}, {Key: schema.HeaderReplay, Value: "2026-12-04T09:00:00Z"}}
	if len(m.Headers) != 2 || m.Headers[0] != want[0] || m.Headers[1] != want[1] || m.Topic != "rebuild" {
		t.Errorf("markReplay: headers %v, topic %q; want %v, rebuild", m.Headers, m.Topic, want)
	}
	m = &schema.Message{Topic: "own"}
	markReplay(m, "", "x")
	if m.Topic != "own" {
		t.Errorf("markReplay without a topic: topic %q; want the row's own", m.Topic)
	}
}

// Recover reads from exactly one of --since, --since-message-id and
// --all, --margin before the time selected.
func TestRecoverSince(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	msgAt := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	lookedUp := false
	msg := func() (time.Time, error) { lookedUp = true; return msgAt, nil }
	for _, tc := range []struct {
		o           Options
		since, from time.Time // zero from: every row
		problem     string
	}{
		{o: Options{Since: "1h", Margin: time.Hour}, since: now.Add(-time.Hour), from: now.Add(-2 * time.Hour)},
		{o: Options{SinceMessageID: "id", Margin: time.Minute}, since: msgAt, from: msgAt.Add(-time.Minute)},
		{o: Options{All: true, Margin: -time.Hour}},
		{o: Options{}, problem: "give exactly one of --since TIME, --since-message-id ID or --all"},
		{o: Options{Since: "1h", All: true}, problem: "give exactly one of"},
		{o: Options{Since: "1h", SinceMessageID: "id"}, problem: "give exactly one of"},
		{o: Options{Since: "soon"}, problem: `--since is "soon"`},
		{o: Options{Since: "1h", Margin: -time.Second}, problem: "--margin is -1s; want 0 or more"},
	} {
		since, from, err := tc.o.since(now, msg)
		switch {
		case tc.problem != "":
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("%+v: got %v; want an error saying %q", tc.o, err, tc.problem)
			}
		case err != nil || !since.Equal(tc.since) || (from == nil) != tc.from.IsZero() || (from != nil && !from.Equal(tc.from)):
			t.Errorf("%+v: got since %s, from %v, %v; want %s, %s", tc.o, since, from, err, tc.since, tc.from)
		}
	}
	if !lookedUp {
		t.Error("--since-message-id did not read the message's time")
	}
	boom := errors.New("no such row")
	if _, _, err := (Options{SinceMessageID: "x"}).since(now, func() (time.Time, error) { return time.Time{}, boom }); !errors.Is(err, boom) {
		t.Errorf("a failed look-up: got %v; want %v", err, boom)
	}
}

// A pending recovery's selection is taken over: the earlier start wins,
// and one of every row makes this one read every row too.
func TestWiden(t *testing.T) {
	early, late := time.Unix(100, 0), time.Unix(200, 0)
	for _, tc := range []struct{ from, pending, want *time.Time }{
		{&late, &early, &early},
		{&early, &late, &early},
		{&late, nil, nil},
		{nil, &early, nil},
	} {
		if got := widen(tc.from, tc.pending); (got == nil) != (tc.want == nil) || (got != nil && !got.Equal(*tc.want)) {
			t.Errorf("widen(%v, %v) = %v; want %v", tc.from, tc.pending, got, tc.want)
		}
	}
}

func TestRecoveredSummary(t *testing.T) {
	since := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	from := since.Add(-time.Hour)
	r := Recovered{
		Result: Result{Selected: 12, Published: 10, Parked: 2, Before: 3, Order: "id", Took: 2 * time.Second},
		Slot:   "walrelay", DeadLetters: schema.Table{Schema: "public", Name: "outbox_dead_letters"},
		Since: since, From: &from, Streams: pglogrepl.LSN(0x16B3748),
	}
	want := `recovered slot "walrelay": read the rows that occurred from 2026-12-04T07:00:00Z (1h0m0s before --since), 12 rows, in order of id; ` +
		`10 published, 2 parked in public.outbox_dead_letters, in 2s (6 rows/s); ` +
		`3 occurred before --since (most were in Kafka already: duplicates, which consumers drop by ce_id); ` +
		`the slot streams from 0/16B3748: start walrelay run`
	if got := r.Summary(); got != want {
		t.Errorf("summary:\n got %s\nwant %s", got, want)
	}
	r.Since, r.From = time.Time{}, nil
	if got := r.Summary(); !strings.Contains(got, "read every row, 12 rows") ||
		!strings.Contains(got, "; every row Kafka had already is a duplicate, which consumers drop by ce_id; the slot streams") {
		t.Errorf("summary of --all: %s", got)
	}
}

func TestDryRunReport(t *testing.T) {
	got := dryRunReport(Result{Selected: 5, Order: "id", ByTopic: map[string]int64{"orders": 3, "": 1, "billing": 1}})
	want := "would replay 5 rows (dry run: nothing published), in order of id\n" +
		"         1  (rows that cannot be decoded: the replay would stop at the first)\n" +
		"         1  billing\n" +
		"         3  orders\n"
	if got != want {
		t.Errorf("report:\n got %q\nwant %q", got, want)
	}
}
