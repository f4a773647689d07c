package slot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// CheckTable judges the outbox table alone, with the words of check's
// "outbox table" and "table columns" rules, and nothing else: no
// publication, no slot, no replication right.
func TestCheckTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := slot.CheckTable(ctx, f.config()); err != nil {
		t.Fatalf("CheckTable of a table with the outbox columns and no publication or slot: got %v; want nil", err)
	}
	for _, tc := range []struct {
		name string
		cfg  func(c *slot.Config)
		want []string
	}{
		{"missing table", func(c *slot.Config) { c.Table.Name += "_none" }, []string{"outbox table: ", "_none does not exist"}},
		{"missing column", func(c *slot.Config) {
			c.Columns = schema.DefaultColumns()
			c.Columns.Payload = "body"
		}, []string{"table columns: ", `column "body" (payload) is missing`, "schema.Columns.Payload"}},
		{"unreadable type", func(c *slot.Config) {
			c.Columns = schema.DefaultColumns()
			c.Columns.Payload = "id"
		}, []string{"table columns: ", `column "id" (payload)`, "has type bigint"}},
		{"content type column of another type", func(c *slot.Config) { c.ContentTypeColumn = "id" },
			[]string{"table columns: ", `column "id" (content type)`, "has type bigint", "decoder.Config.ContentTypeColumn"}},
		{"no aggregate type", func(c *slot.Config) {
			c.Columns = schema.DefaultColumns()
			c.Columns.AggregateType = "kind"
		}, []string{"table columns: ", `column "kind" (aggregate_type) is missing`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config()
			tc.cfg(&cfg)
			err := slot.CheckTable(ctx, cfg)
			if !slot.IsConfig(err) {
				t.Fatalf("CheckTable: got %v; want a *ConfigError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckTable: got %q; want it to say %q", err, w)
				}
			}
		})
	}
	cfg := f.config()
	cfg.ContentTypeColumn = "note" // text
	if err := slot.CheckTable(ctx, cfg); err != nil {
		t.Errorf("CheckTable with a text content type column: got %v; want nil", err)
	}
	cfg.ContentTypeColumn = "absent" // optional
	if err := slot.CheckTable(ctx, cfg); err != nil {
		t.Errorf("CheckTable without the content type column: got %v; want nil", err)
	}
	cfg = f.config()
	cfg.Columns = schema.DefaultColumns()
	cfg.Columns.AggregateType = "kind"
	cfg.AggregateTypeDefault = "order"
	if err := slot.CheckTable(ctx, cfg); err != nil {
		t.Errorf("CheckTable without an aggregate type column and a default: got %v; want nil", err)
	}
}
