package outbox

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
)

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIDIsAVersion7UUIDOfNow(t *testing.T) {
	before := time.Now().UnixMilli()
	id := NewID()
	after := time.Now().UnixMilli()
	if !uuidV7.MatchString(id.String()) {
		t.Fatalf("NewID() = %s; want a version 7, variant 10 UUID", id)
	}
	if ms := idMillis(id); ms < before || ms > after {
		t.Errorf("timestamp of %s is %d; want between %d and %d", id, ms, before, after)
	}
	back, err := schema.ParseMessageID(id.String())
	if err != nil || back != id {
		t.Errorf("ParseMessageID(%s) = %s, %v; want the same id", id, back, err)
	}
}

func TestNewIDOrdersByMillisecond(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	var prev schema.MessageID
	for i := 0; i < 1000; i++ {
		id := newIDAt(base.Add(time.Duration(i) * time.Millisecond))
		if got := idMillis(id); got != base.UnixMilli()+int64(i) {
			t.Fatalf("id %d carries %d ms; want %d", i, got, base.UnixMilli()+int64(i))
		}
		if i > 0 && prev >= id {
			t.Fatalf("id %d (%s) does not sort after id %d (%s)", i, id, i-1, prev)
		}
		prev = id
	}
}

func TestNewIDIsUnique(t *testing.T) {
	const n = 100000
	seen := make(map[schema.MessageID]bool, n)
	for i := 0; i < n; i++ {
		id := NewID()
		if seen[id] {
			t.Fatalf("id %s repeated after %d ids", id, i)
		}
		seen[id] = true
	}
	// Within one millisecond the bits after the timestamp are random: the
	// 74 random bits of two ids of the same time differ.
	t0 := time.Now()
	a, b := newIDAt(t0), newIDAt(t0)
	if a[14:] == b[14:] {
		t.Errorf("two ids of the same millisecond share their random bits: %s, %s", a, b)
	}
}

// idMillis reads the 48-bit Unix millisecond timestamp of a UUIDv7.
func idMillis(id schema.MessageID) int64 {
	ms, err := strconv.ParseInt(string(id[0:8])+string(id[9:13]), 16, 64)
	if err != nil {
		panic(err)
	}
	return ms
}
