package decoder

import (
	"slices"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/schema"
)

// addSpanContext puts the trace context of a span context column's value
// (Debezium's tracingspancontext, Java Properties text) on m as the
// traceparent header, with tracestate when it has one. The column's trace
// context replaces the headers column's traceparent and tracestate: the two
// must describe one span. A value that is empty gives nothing; one that does
// not read as Properties, or whose traceparent is missing or not W3C form,
// gives no trace header and says so in m.SpanContextDrops, as does a
// tracestate walrelay would not put on a record. The message itself is
// fine: the sink publishes it, and counts the drop.
func addSpanContext(m *schema.Message, b []byte) {
	text := string(b)
	if strings.TrimSpace(text) == "" {
		return
	}
	props, ok := parseProperties(text)
	traceparent := props[schema.HeaderTraceparent]
	if !ok || !schema.ValidTraceparent(traceparent) {
		m.SpanContextDrops = append(m.SpanContextDrops, schema.HeaderTraceparent)
		return
	}
	hs := slices.DeleteFunc(m.Headers, func(h schema.Header) bool {
		return strings.EqualFold(h.Key, schema.HeaderTraceparent) || strings.EqualFold(h.Key, schema.HeaderTracestate)
	})
	hs = append(hs, schema.Header{Key: schema.HeaderTraceparent, Value: traceparent})
	switch tracestate := props[schema.HeaderTracestate]; {
	case tracestate == "":
	case schema.ValidTracestate(tracestate):
		hs = append(hs, schema.Header{Key: schema.HeaderTracestate, Value: tracestate})
	default:
		m.SpanContextDrops = append(m.SpanContextDrops, schema.HeaderTracestate)
	}
	slices.SortStableFunc(hs, func(a, b schema.Header) int { return strings.Compare(a.Key, b.Key) })
	m.Headers = hs
}

// parseProperties reads text as java.util.Properties.load does: natural
// lines end at \n, \r or \r\n; a line ending in an odd number of
// backslashes goes on with the next, whose leading white space is
// dropped; blank lines and comments (# or ! first) are skipped; a key ends
// at the first unescaped '=', ':' or white space, and one '=' or ':'
// around white space separates it from the value; escapes are \t, \n, \r,
// \f, \uXXXX and a backslash before any other character, which stands for
// that character. Of repeated keys the last wins. ok is false for a
// malformed \u escape, as Java refuses it.
func parseProperties(text string) (props map[string]string, ok bool) {
	props = map[string]string{}
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := trimLeftSpace(lines[i])
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for endsContinued(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + trimLeftSpace(lines[i])
		}
		if endsContinued(line) { // the last line: the backslash escapes nothing
			line = line[:len(line)-1]
		}
		rawKey, rawValue := splitProperty(line)
		key, okKey := unescapeProperty(rawKey)
		value, okValue := unescapeProperty(rawValue)
		if !okKey || !okValue {
			return props, false
		}
		props[key] = value
	}
	return props, true
}

// propertySpace is white space to java.util.Properties.
func propertySpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeftSpace(s string) string {
	i := 0
	for i < len(s) && propertySpace(s[i]) {
		i++
	}
	return s[i:]
}

// endsContinued reports whether line ends in an odd number of backslashes.
func endsContinued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty cuts a logical line into its key and value, both still
// escaped.
func splitProperty(line string) (key, value string) {
	end := 0
	for end < len(line) {
		c := line[end]
		if c == '\\' {
			end += 2
			continue
		}
		if c == '=' || c == ':' || propertySpace(c) {
			break
		}
		end++
	}
	end = min(end, len(line))
	rest := trimLeftSpace(line[end:])
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = trimLeftSpace(rest[1:])
	}
	return line[:end], rest
}

// unescapeProperty resolves the escapes of a key or value; ok is false
// for a malformed \u escape.
func unescapeProperty(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", false
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", false
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), true
}
