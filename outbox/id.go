package outbox

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
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
	var id [16]byte
	rand.Read(id[:]) //nolint:errcheck // never fails (crypto/rand, Go 1.24+)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[0:6], ms[2:8])
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return schema.MessageID(formatUUID(id))
}

// formatUUID is the canonical 8-4-4-4-12 form of id, as PostgreSQL prints
// a uuid.
func formatUUID(id [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}
