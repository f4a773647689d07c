package slot

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// A partitioned outbox table: without publish_via_partition_root the
// publication lists the partitions in the table's place, and check says
// that, with the fix that works, instead of "does not include the table"
// and "publishes 2 other tables" (whose fixes loop).
func TestPartitionedOutboxPublication(t *testing.T) {
	parts := []schema.Table{{Schema: "public", Name: "outbox_p1"}, {Schema: "public", Name: "outbox_p2"}}
	results := func(viaRoot bool) map[string]check.Result {
		f := goodFacts()
		f.partitions = parts
		f.pub.ViaRoot = viaRoot
		if !viaRoot {
			f.pub.Tables = parts
		}
		out := map[string]check.Result{}
		for _, r := range judge(f, publicationRules) {
			out[r.Name] = r
		}
		return out
	}

	off := results(false)
	p, ok := off["publication partitions"]
	if !ok || p.Status != check.Fail || !strings.Contains(p.Found, "publish_via_partition_root is off") ||
		p.Fix != `ALTER PUBLICATION "outbox_pub" SET (publish_via_partition_root = true).` {
		t.Errorf("without publish_via_partition_root: %+v; want a failure with the ALTER PUBLICATION ... SET fix", p)
	}
	if c, ok := off["publication table"]; ok {
		t.Errorf("publication table: %+v; want no result (the partitions rule speaks)", c)
	}
	if s := off["publication scope"]; s.Status != check.OK {
		t.Errorf("publication scope: %+v; want ok (its own partitions are not other tables)", s)
	}

	on := results(true)
	if p := on["publication partitions"]; p.Status != check.OK || !strings.Contains(p.Found, "2 partitions") {
		t.Errorf("with publish_via_partition_root: %+v; want ok naming the partitions", p)
	}
	if c := on["publication table"]; c.Status != check.OK {
		t.Errorf("publication table with publish_via_partition_root: %+v; want ok", c)
	}

	// A plain table has no partitions result.
	for _, r := range judge(goodFacts(), publicationRules) {
		if r.Name == "publication partitions" {
			t.Errorf("plain table: %+v; want no partitions result", r)
		}
	}
}
