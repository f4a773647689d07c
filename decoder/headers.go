package decoder

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/walrelay/walrelay/schema"
)

// headerStats describes a valid headers object.
type headerStats struct {
	members int // all members
	strings int // members whose value is a string
	bytes   int // raw (escaped) bytes of the string members' keys and values
}

// countHeaders checks that raw is a JSON object and counts its members. The
// bytes bound what the unescaped strings take. The reason is empty on
// success.
func countHeaders(raw []byte) (st headerStats, reason string) {
	if !json.Valid(raw) {
		return st, "headers are not valid JSON"
	}
	if i := skipSpace(raw, 0); i >= len(raw) || raw[i] != '{' {
		return st, "headers are not a JSON object"
	}
	eachMember(raw, func(key, val []byte, isString bool) {
		st.members++
		if isString {
			st.strings++
			st.bytes += len(key) + len(val)
		}
	})
	return st, ""
}

// buildHeaders turns the string members of the valid JSON object raw into
// headers sorted by key, their strings unescaped into the arena a. Of
// repeated keys the last wins, as in jsonb, also when the last value is
// not a string (then the key yields no header).
func buildHeaders(a *strings.Builder, raw []byte, st headerStats) []schema.Header {
	if st.strings == 0 {
		return nil
	}
	if st.members != st.strings {
		return buildMixedHeaders(a, raw, st)
	}
	hs := make([]schema.Header, 0, st.strings)
	eachMember(raw, func(key, val []byte, _ bool) {
		hs = append(hs, schema.Header{Key: unescape(a, key), Value: unescape(a, val)})
	})
	return lastByKey(hs, func(h schema.Header) string { return h.Key })
}

// buildMixedHeaders is buildHeaders for an object with members of other
// kinds, which must take part in "last wins" before they are dropped. It
// costs one more allocation.
func buildMixedHeaders(a *strings.Builder, raw []byte, st headerStats) []schema.Header {
	type member struct {
		schema.Header
		isString bool
	}
	ms := make([]member, 0, st.members)
	eachMember(raw, func(key, val []byte, isString bool) {
		m := member{Header: schema.Header{Key: unescape(a, key)}, isString: isString}
		if isString {
			m.Value = unescape(a, val)
		}
		ms = append(ms, m)
	})
	ms = lastByKey(ms, func(m member) string { return m.Key })
	hs := make([]schema.Header, 0, len(ms))
	for _, m := range ms {
		if m.isString {
			hs = append(hs, m.Header)
		}
	}
	return hs
}

// lastByKey sorts s by key, keeping of each key only its last element in
// the original order. It sorts in place and allocates nothing.
func lastByKey[T any](s []T, key func(T) string) []T {
	slices.SortStableFunc(s, func(x, y T) int { return strings.Compare(key(x), key(y)) })
	out := s[:0]
	for i, e := range s {
		if i+1 < len(s) && key(s[i+1]) == key(e) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// eachMember calls fn for every member of the top-level object, with its
// escaped key and, when the value is a string, its escaped value (nil for
// other kinds of value). raw must be valid JSON
// with an object at the top; the walk is still bounds-checked throughout
// and always advances, so other input cannot make it panic or loop.
func eachMember(raw []byte, fn func(key, val []byte, isString bool)) {
	i := skipSpace(raw, 0) + 1 // past '{'
	for i < len(raw) {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] == '}' {
			return
		}
		if raw[i] == ',' {
			i++
			continue
		}
		key, j := jsonString(raw, i)
		i = skipSpace(raw, skipSpace(raw, j)+1) // past ':'
		if i < len(raw) && raw[i] == '"' {
			val, j := jsonString(raw, i)
			fn(key, val, true)
			i = j
			continue
		}
		fn(key, nil, false)
		i = skipValue(raw, i)
	}
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// jsonString returns the escaped contents of the string whose opening
// quote is at i, and the index after its closing quote.
func jsonString(raw []byte, i int) ([]byte, int) {
	j := i + 1
	for j < len(raw) && raw[j] != '"' {
		if raw[j] == '\\' {
			j++
		}
		j++
	}
	j = min(j, len(raw))
	return raw[min(i+1, j):j], j + 1
}

// skipValue returns the index just after the non-string value at i (a
// number, literal, object or array).
func skipValue(raw []byte, i int) int {
	depth := 0
	for i < len(raw) {
		switch raw[i] {
		case '"':
			_, i = jsonString(raw, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// unescape writes the JSON string contents s, unescaped, to the arena and
// returns them. A lone surrogate becomes U+FFFD, as in encoding/json.
func unescape(a *strings.Builder, s []byte) string {
	start := a.Len()
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			a.Write(s)
			break
		}
		a.Write(s[:i])
		s = s[i:]
		if len(s) < 2 {
			break
		}
		n := 2
		switch c := s[1]; c {
		case 'b':
			a.WriteByte('\b')
		case 'f':
			a.WriteByte('\f')
		case 'n':
			a.WriteByte('\n')
		case 'r':
			a.WriteByte('\r')
		case 't':
			a.WriteByte('\t')
		case 'u':
			var r rune
			r, n = unescapeRune(s)
			a.WriteRune(r)
		default: // '"', '\\', '/'
			a.WriteByte(c)
		}
		s = s[n:]
	}
	return a.String()[start:]
}

// unescapeRune decodes the \uXXXX escape (or surrogate pair) that s starts
// with, and says how many bytes it took.
func unescapeRune(s []byte) (rune, int) {
	r, ok := hex4(s[2:])
	if !ok {
		return utf8.RuneError, 2
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if r2, ok := hex4(s[8:]); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, 12
			}
		}
	}
	return utf8.RuneError, 6
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		h, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}
