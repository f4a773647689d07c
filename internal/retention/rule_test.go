package retention

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

func TestXid32IsTheLowHalfOfTheXid8(t *testing.T) {
	for _, tc := range []struct {
		xmin uint64
		want string
	}{
		{735, "735"},
		{1<<32 - 1, "4294967295"},
		{1<<32 + 5, "5"},           // epoch 1: a row written now holds xmin 5
		{7<<32 + 123456, "123456"}, // any epoch
	} {
		if got := (Mark{Xmin: tc.xmin}).xid32(); got != tc.want {
			t.Errorf("Mark{Xmin: %d}.xid32() = %s; want %s", tc.xmin, got, tc.want)
		}
	}
}

func TestPassed(t *testing.T) {
	live := func(confirmed pglogrepl.LSN) slot.Figures {
		return slot.Figures{Info: slot.Info{Exists: true, Type: "logical", Database: "shop", ConfirmedFlush: confirmed, WALStatus: "reserved"}}
	}
	lost := live(0x2000)
	lost.WALStatus = "lost"
	physical := live(0x2000)
	physical.Type = "physical"
	for _, tc := range []struct {
		name    string
		f       slot.Figures
		done    bool
		problem string // in the error; "" for none
	}{
		{"behind", live(0xFFF), false, ""},
		{"at the mark", live(0x1000), true, ""},
		{"past the mark", live(0x1001), true, ""},
		{"never confirmed", live(0), false, ""},
		{"missing", slot.Figures{}, false, "does not exist"},
		{"lost", lost, false, "is lost"},
		{"physical", physical, false, "physical slot"},
		{"other database", func() slot.Figures { f := live(0x2000); f.Database = "crm"; return f }(), false, `decodes database "crm"`},
	} {
		done, err := passed(tc.f, "walrelay", "shop", 0x1000)
		if done != tc.done || (err == nil) != (tc.problem == "") || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
			t.Errorf("%s: passed = %v, %v; want %v and an error containing %q", tc.name, done, err, tc.done, tc.problem)
		}
	}
}

func TestConfigDefaultsAndRefusals(t *testing.T) {
	c := Config{Table: schema.Table{Schema: "public", Name: "outbox"}, Retention: time.Hour}
	c.setDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if c.OccurredAt != "occurred_at" || c.Slot != "walrelay" || c.Batch != 1000 || c.Pause != 100*time.Millisecond ||
		c.Wait != time.Minute || c.PollInterval != time.Second || c.Recoveries != (schema.Table{Schema: "public", Name: "outbox_recoveries"}) {
		t.Errorf("defaults: got %+v; want occurred_at, walrelay, 1000, 100ms, 1m, 1s, public.outbox_recoveries", c)
	}
	for _, tc := range []struct {
		name    string
		change  func(*Config)
		problem string
	}{
		{"no retention", func(c *Config) { c.Retention = 0 }, "required"},
		{"negative retention", func(c *Config) { c.Retention = -time.Hour }, "required"},
		{"seconds", func(c *Config) { c.Retention = 59 * time.Second }, "under 1m0s"},
		{"negative batch", func(c *Config) { c.Batch = -1 }, "not positive"},
		{"empty column", func(c *Config) { c.OccurredAt = "" }, "occurred_at column"},
		{"table with a NUL", func(c *Config) { c.Table.Name = "a\x00b" }, "table"},
		{"bad slot", func(c *Config) { c.Slot = "Bad Slot" }, "slot"},
		{"recoveries table too long", func(c *Config) { c.Recoveries.Name = strings.Repeat("r", 64) }, "recoveries table"},
	} {
		bad := c
		tc.change(&bad)
		if err := bad.validate(); err == nil || !strings.Contains(err.Error(), tc.problem) {
			t.Errorf("%s: validate = %v; want an error containing %q", tc.name, err, tc.problem)
		}
	}
}

// A pending recovery keeps the rows since its Since: the cutoff moves back
// to it, never forward; one of every row keeps everything.
func TestSpare(t *testing.T) {
	cutoff := time.Date(2025, 3, 8, 12, 0, 0, 0, time.UTC)
	before, after := cutoff.Add(-48*time.Hour), cutoff.Add(time.Hour)
	m := Mark{Xmin: 7, Cutoff: cutoff}
	for _, tc := range []struct {
		name   string
		r      *slot.Recovery
		cutoff time.Time
		some   bool
	}{
		{"none pending", nil, cutoff, true},
		{"since before the cutoff", &slot.Recovery{Since: &before}, before, true},
		{"since after the cutoff", &slot.Recovery{Since: &after}, cutoff, true},
		{"every row", &slot.Recovery{}, cutoff, false},
	} {
		got, some := spare(m, tc.r)
		if some != tc.some || (some && (!got.Cutoff.Equal(tc.cutoff) || got.Xmin != m.Xmin)) {
			t.Errorf("%s: got %+v, %v; want cutoff %s, %v", tc.name, got, some, tc.cutoff, tc.some)
		}
	}
}
