package decoder

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/walrelay/walrelay/schema"
)

// FuzzHeaders compares the header extraction with encoding/json on every
// valid UTF-8 JSON object: the same string members, unescaped the same way.
func FuzzHeaders(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":"b"}`, `{"b": "2", "n": 5, "o": {"x": "y"}, "a": "1", "arr": ["s", {}], "t": true, "z": null}`,
		`{"k\"ey\\": "line\nnext \u00e9 \ud83d\ude00 \/ \b\f\r\t", "lone": "\ud800x", "pair": "\uD834\uDD1E"}`,
		`{"k": "1", "k": "2"}`, `[1]`, `"s"`, `{"a":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		st, reason := countHeaders(raw)
		var obj map[string]any
		jsonErr := json.Unmarshal(raw, &obj)
		if (reason == "") != (jsonErr == nil && obj != nil) {
			t.Fatalf("countHeaders(%q) reason %q; encoding/json: %v, %v", raw, reason, obj, jsonErr)
		}
		if reason != "" || !utf8.Valid(raw) {
			return
		}
		var a strings.Builder
		a.Grow(st.bytes)
		got := buildHeaders(&a, raw, st)
		var want []schema.Header
		for k, v := range obj {
			if s, ok := v.(string); ok {
				want = append(want, schema.Header{Key: k, Value: s})
			}
		}
		slices.SortFunc(want, func(x, y schema.Header) int { return strings.Compare(x.Key, y.Key) })
		if !slices.Equal(got, want) {
			t.Fatalf("headers of %q = %q; want %q", raw, got, want)
		}
	})
}
