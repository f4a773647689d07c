package schema

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// Header keys of where a record came from in the WAL (issue 38, DECISIONS
// 47). Every record walrelay run publishes from the stream carries both; a
// record `walrelay recover`, `replay` or `dlq retry` publishes from a table
// carries neither, because it is not in the stream's order.
const (
	// HeaderWALSource names the stream: the database system's identifier,
	// the database and the slot, e.g. "7433256101470117656/shop/walrelay".
	// It is the same on a promoted standby (a physical standby keeps the
	// system identifier) and different for another slot or cluster.
	HeaderWALSource = "walrelay_source"
	// HeaderWALPosition is the record's place in that stream: the timeline
	// it was read on, the commit LSN of its transaction, its place among
	// the transaction's outbox rows and the partition count its key was
	// routed by, e.g. "tli=1 lsn=0/16B3748 seq=0 partitions=3".
	HeaderWALPosition = "walrelay_position"
)

// WALSource is a HeaderWALSource value: the system identifier, database
// and slot of a stream.
func WALSource(systemID, database, slot string) string {
	return systemID + "/" + database + "/" + slot
}

// WALMark is what HeaderWALPosition says of one record.
type WALMark struct {
	Timeline   int32
	Pos        Position
	Partitions int
}

// String is the header value: "tli=1 lsn=0/16B3748 seq=0 partitions=3".
func (w WALMark) String() string {
	return string(w.Append(nil))
}

// Append appends the header value to b.
func (w WALMark) Append(b []byte) []byte {
	b = append(b, "tli="...)
	b = strconv.AppendInt(b, int64(w.Timeline), 10)
	b = append(b, " lsn="...)
	b = appendUpperHex(b, uint32(w.Pos.CommitLSN>>32))
	b = append(b, '/')
	b = appendUpperHex(b, uint32(w.Pos.CommitLSN))
	b = append(b, " seq="...)
	b = strconv.AppendUint(b, uint64(w.Pos.Seq), 10)
	b = append(b, " partitions="...)
	return strconv.AppendInt(b, int64(w.Partitions), 10)
}

// ParseWALMark reads a HeaderWALPosition value. Fields it does not know are
// ignored, so that a later walrelay may add some; each of tli, lsn, seq
// and partitions must be there once, valid.
func ParseWALMark(v string) (WALMark, error) {
	var w WALMark
	var seen [4]bool
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			return WALMark{}, fmt.Errorf("walrelay_position %q: field %q is not key=value", v, f)
		}
		i := -1
		var err error
		switch k {
		case "tli":
			i = 0
			var n int64
			n, err = strconv.ParseInt(val, 10, 32)
			w.Timeline = int32(n)
			if err == nil && n <= 0 {
				err = errors.New("not positive")
			}
		case "lsn":
			i = 1
			w.Pos.CommitLSN, err = pglogrepl.ParseLSN(val)
		case "seq":
			i = 2
			var n uint64
			n, err = strconv.ParseUint(val, 10, 32)
			w.Pos.Seq = uint32(n)
		case "partitions":
			i = 3
			w.Partitions, err = strconv.Atoi(val)
			if err == nil && w.Partitions <= 0 {
				err = errors.New("not positive")
			}
		default:
			continue
		}
		if err != nil {
			return WALMark{}, fmt.Errorf("walrelay_position %q: %s: %w", v, k, err)
		}
		if seen[i] {
			return WALMark{}, fmt.Errorf("walrelay_position %q: %s twice", v, k)
		}
		seen[i] = true
	}
	for i, k := range []string{"tli", "lsn", "seq", "partitions"} {
		if !seen[i] {
			return WALMark{}, fmt.Errorf("walrelay_position %q: no %s", v, k)
		}
	}
	return w, nil
}

// appendUpperHex appends v in upper-case hexadecimal without leading
// zeros, as PostgreSQL prints each half of an LSN.
func appendUpperHex(b []byte, v uint32) []byte {
	const digits = "0123456789ABCDEF"
	var buf [8]byte
	i := len(buf)
	for {
		i--
		buf[i] = digits[v&0xF]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(b, buf[i:]...)
}
