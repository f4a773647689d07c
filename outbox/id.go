package outbox

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// NewID returns a new random, time-ordered UUID (version 7), so that ids
// written close in time sit close in the primary key's index.
//
// Layout (RFC 9562): 48 bits of Unix time in milliseconds, the version
// nibble 7, 12 random bits, the variant bits 10, 62 random bits. Ids of
// different milliseconds sort by time; within one millisecond their order
// is random (74 random bits make a collision practically impossible).
func NewID() schema.MessageID {
	return newIDAt(time.Now())
}

// newIDAt is NewID for the time t.
func newIDAt(t time.Time) schema.MessageID {
	var id schema.MessageID
	rand.Read(id[:]) //nolint:errcheck // never fails (crypto/rand, Go 1.24+)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[0:6], ms[2:8])
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}
