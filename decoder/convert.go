package decoder

import (
	"bytes"
	"time"
)

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// decodeByteaHex decodes bytea's hex output form, `\x` then two hex digits
// per byte, into a new slice.
func decodeByteaHex(b []byte) ([]byte, bool) {
	if len(b) < 2 || b[0] != '\\' || b[1] != 'x' || len(b)%2 != 0 {
		return nil, false
	}
	b = b[2:]
	out := make([]byte, len(b)/2)
	for i := range out {
		hi, ok1 := unhex(b[2*i])
		lo, ok2 := unhex(b[2*i+1])
		if !ok1 || !ok2 {
			return nil, false
		}
		out[i] = hi<<4 | lo
	}
	return out, true
}

// parseInt64 reads an integer as PostgreSQL prints one: an optional minus
// sign and decimal digits.
func parseInt64(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // 19 digits cannot overflow uint64
	}
	switch {
	case neg && n <= 1<<63:
		return int64(-n), true
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// parseTimestamp reads a timestamp as PostgreSQL prints it with DateStyle
// ISO: `2026-12-02 13:04:11.123456+05:30`. The offset (hours, then
// optional minutes and seconds) is present when zoned (timestamptz) and
// absent otherwise (timestamp, read as UTC). The result is in UTC, so that
// no *time.Location is allocated per row. The reason is empty on success.
func parseTimestamp(b []byte, zoned bool) (time.Time, string) {
	switch {
	case string(b) == "infinity" || string(b) == "-infinity":
		return time.Time{}, "infinite timestamp " + quote(b)
	case bytes.HasSuffix(b, []byte(" BC")):
		return time.Time{}, "years BC are not supported: " + quote(b)
	}
	p := textParser{b: b}
	year := p.num(4, 6)
	p.lit('-')
	month := p.num(2, 2)
	p.lit('-')
	day := p.num(2, 2)
	p.lit(' ')
	hour := p.num(2, 2)
	p.lit(':')
	minute := p.num(2, 2)
	p.lit(':')
	sec := p.num(2, 2)
	nsec := p.fraction()
	var offset int
	if zoned {
		offset = p.offset()
	}
	if p.bad || p.i != len(b) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, "not a timestamp: " + quote(b)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day {
		return time.Time{}, "not a timestamp: " + quote(b)
	}
	return t.Add(-time.Duration(offset) * time.Second), ""
}

// textParser reads a fixed textual layout; any mismatch sets bad and later
// reads return zero.
type textParser struct {
	b   []byte
	i   int
	bad bool
}

func (p *textParser) peek() byte {
	if p.bad || p.i >= len(p.b) {
		return 0
	}
	return p.b[p.i]
}

func (p *textParser) lit(c byte) {
	if p.peek() != c {
		p.bad = true
		return
	}
	p.i++
}

// num reads min to max decimal digits.
func (p *textParser) num(min, max int) int {
	n, start := 0, p.i
	for p.i-start < max {
		c := p.peek()
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		p.i++
	}
	if p.i-start < min {
		p.bad = true
	}
	return n
}

// fraction reads an optional `.` and 1 to 9 digits as nanoseconds.
func (p *textParser) fraction() int {
	if p.peek() != '.' {
		return 0
	}
	p.i++
	start := p.i
	n := p.num(1, 9)
	for d := p.i - start; d < 9; d++ {
		n *= 10
	}
	return n
}

// offset reads a UTC offset, `+HH`, `+HH:MM` or `+HH:MM:SS` (or `-`), in
// seconds east of UTC.
func (p *textParser) offset() int {
	sign := 1
	switch p.peek() {
	case '+':
	case '-':
		sign = -1
	default:
		p.bad = true
		return 0
	}
	p.i++
	h, m, s := p.num(2, 2), 0, 0
	if p.peek() == ':' {
		p.i++
		m = p.num(2, 2)
		if p.peek() == ':' {
			p.i++
			s = p.num(2, 2)
		}
	}
	if h > 23 || m > 59 || s > 59 {
		p.bad = true
	}
	return sign * (h*3600 + m*60 + s)
}
