package decoder

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// reader walks one pgoutput message. Every read is bounds-checked: a read
// past the end sets short and returns a zero value, so a parser reads its
// fields straight through and checks once, in finish.
type reader struct {
	buf   []byte
	pos   int
	short bool
}

func (r *reader) take(n int) []byte {
	if r.short || n < 0 || n > len(r.buf)-r.pos {
		r.short = true
		return nil
	}
	b := r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return b
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) lsn() pglogrepl.LSN { return pglogrepl.LSN(r.u64()) }

func (r *reader) time() time.Time { return pgTime(int64(r.u64())) }

// cstring reads a NUL-terminated string, without the NUL.
func (r *reader) cstring() []byte {
	if r.short {
		return nil
	}
	n := bytes.IndexByte(r.buf[r.pos:], 0)
	if n < 0 {
		r.short = true
		return nil
	}
	s := r.take(n)
	r.pos++ // the NUL
	return s
}

// finish reports a truncated message, or bytes left over after it (which
// means the frame is not in the format this decoder reads, e.g. streaming).
func (r *reader) finish() error {
	if r.short {
		return fmt.Errorf("truncated message (%d bytes)", len(r.buf))
	}
	if rest := len(r.buf) - r.pos; rest > 0 {
		return fmt.Errorf("%d unexpected bytes after the message", rest)
	}
	return nil
}

// pgEpochUnix is 2000-01-01 00:00:00 UTC, PostgreSQL's epoch, in Unix seconds.
const pgEpochUnix = 946684800

// pgTime converts microseconds since the PostgreSQL epoch to a UTC time.
func pgTime(us int64) time.Time {
	sec, rem := us/1e6, us%1e6
	if rem < 0 {
		sec, rem = sec-1, rem+1e6
	}
	return time.Unix(pgEpochUnix+sec, rem*1e3).UTC()
}
