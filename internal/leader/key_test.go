package leader

import (
	"hash/fnv"
	"testing"
)

func TestLockKey(t *testing.T) {
	base := LockKey("walrelay", "orders")
	if got := LockKey("walrelay", "orders"); got != base {
		t.Fatalf("LockKey is not stable: got %d; want %d", got, base)
	}
	h := fnv.New64a()
	h.Write([]byte("walrelay\x00walrelay\x00orders"))
	if want := int64(h.Sum64()); base != want {
		t.Errorf("LockKey(walrelay, orders): got %d; want FNV-1a 64 %d", base, want)
	}
	differ := []struct{ name, db, slot string }{
		{"other slot", "walrelay", "payments"},
		{"other database", "shop", "orders"},
		{"names shifted across the separator", "walrelayo", "rders"},
		{"swapped", "orders", "walrelay"},
	}
	for _, c := range differ {
		if got := LockKey(c.db, c.slot); got == base {
			t.Errorf("%s: LockKey(%q, %q) = %d, same as (walrelay, orders)", c.name, c.db, c.slot, got)
		}
	}
}

func TestLockTag(t *testing.T) {
	cases := []struct {
		key            int64
		classid, objid int64
	}{
		{0, 0, 0},
		{1, 0, 1},
		{1 << 32, 1, 0},
		{-1, 0xffffffff, 0xffffffff},
		{-1 << 63, 0x80000000, 0},
	}
	for _, c := range cases {
		classid, objid := lockTag(c.key)
		if classid != c.classid || objid != c.objid {
			t.Errorf("lockTag(%d): got (%d, %d); want (%d, %d)", c.key, classid, objid, c.classid, c.objid)
		}
	}
}
