package decoder

import (
	"reflect"
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       map[string]string
		ok         bool
	}{
		{"as Debezium stores it", "#Fri Dec 04 09:00:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n",
			map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, true},
		{"empty", "", map[string]string{}, true},
		{"comments and blanks", "! a comment\n   # another\n\n \t \nk=v", map[string]string{"k": "v"}, true},
		{"colon and spaces", "  k1 : v1\nk2:v2\nk3 v3\nk4\t=\t v4 ", map[string]string{"k1": "v1", "k2": "v2", "k3": "v3", "k4": "v4 "}, true},
		{"key only", "lonely\nk=", map[string]string{"lonely": "", "k": ""}, true},
		{"CR and CRLF", "a=1\r\nb=2\rc=3", map[string]string{"a": "1", "b": "2", "c": "3"}, true},
		{"last wins", "k=1\nk=2", map[string]string{"k": "2"}, true},
		{"escapes", `k\:ey\=x=a\tb\nc\u0041\\d\e`, map[string]string{"k:ey=x": "a\tb\ncA\\de"}, true},
		{"escaped space in key", `my\ key = v`, map[string]string{"my key": "v"}, true},
		{"continuation", "k=one, \\\n    two, \\\n\tthree", map[string]string{"k": "one, two, three"}, true},
		{"even backslashes do not continue", "k=a\\\\\nj=b", map[string]string{"k": `a\`, "j": "b"}, true},
		{"a comment does not continue", "# c \\\nk=v", map[string]string{"k": "v"}, true},
		{"trailing backslash on the last line", "k=v\\", map[string]string{"k": "v"}, true},
		{"separator in value", "k=a=b:c", map[string]string{"k": "a=b:c"}, true},
		{"malformed \\u", `k=\u12`, nil, false},
		{"malformed \\u hex", `k=\uZZZZ`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProperties(tc.text)
			if ok != tc.ok {
				t.Fatalf("parseProperties(%q) ok = %v; want %v", tc.text, ok, tc.ok)
			}
			if ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseProperties(%q) = %q; want %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestAddSpanContext(t *testing.T) {
	const (
		tp    = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		other = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	rowHeaders := []schema.Header{{Key: "a", Value: "1"}, {Key: "traceparent", Value: other}, {Key: "tracestate", Value: "x=y"}}
	for _, tc := range []struct {
		name    string
		text    string
		headers []schema.Header
		want    []schema.Header
		drops   []string
	}{
		{"traceparent", "#Fri Dec 04\ntraceparent=" + tp + "\n", nil, []schema.Header{{Key: "traceparent", Value: tp}}, nil},
		{"with tracestate", "traceparent: " + tp + "\ntracestate=rojo=00f067aa0ba902b7\n", nil,
			[]schema.Header{{Key: "traceparent", Value: tp}, {Key: "tracestate", Value: "rojo=00f067aa0ba902b7"}}, nil},
		{"replaces the headers column's trace context, sorted", "traceparent=" + tp, rowHeaders,
			[]schema.Header{{Key: "a", Value: "1"}, {Key: "traceparent", Value: tp}}, nil},
		{"blank is none", " \n ", rowHeaders, rowHeaders, nil},
		{"no traceparent", "#only a comment\nother=1", nil, nil, []string{"traceparent"}},
		{"invalid traceparent keeps the headers column's", "traceparent=00-abc-def-01", rowHeaders, rowHeaders, []string{"traceparent"}},
		{"all-zero trace id", "traceparent=00-00000000000000000000000000000000-b7ad6b7169203331-01", nil, nil, []string{"traceparent"}},
		{"unparseable", `traceparent=\u00`, nil, nil, []string{"traceparent"}},
		{"not properties at all", "{\"traceparent\": \"" + tp + "\"}", nil, nil, []string{"traceparent"}},
		{"bad tracestate", "traceparent=" + tp + "\ntracestate=caf\\u00e9", nil,
			[]schema.Header{{Key: "traceparent", Value: tp}}, []string{"tracestate"}},
		{"empty tracestate", "traceparent=" + tp + "\ntracestate=", nil, []schema.Header{{Key: "traceparent", Value: tp}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &schema.Message{Headers: append([]schema.Header(nil), tc.headers...)}
			addSpanContext(m, []byte(tc.text))
			if !reflect.DeepEqual(m.Headers, tc.want) || !reflect.DeepEqual(m.SpanContextDrops, tc.drops) {
				t.Errorf("headers %q, drops %q; want %q, %q", m.Headers, m.SpanContextDrops, tc.want, tc.drops)
			}
		})
	}
}

// The span context column through RowDecoder (the stream's rows take the
// same path): optional, read when present, and refused as the name of
// another field.
func TestSpanContextColumn(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	cols := []Column{{Name: "message_id", Type: oidUUID}, {Name: "aggregate_type", Type: oidText}, {Name: "aggregate_id", Type: oidText},
		{Name: "type", Type: oidText}, {Name: "payload", Type: oidJSONB}, {Name: "tracingspancontext", Type: oidVarchar}}
	cfg := Config{SpanContextColumn: "tracingspancontext"}
	row := func(span []byte) [][]byte {
		return [][]byte{[]byte(testID), []byte("order"), []byte("o-1"), []byte("order.placed.v1"), []byte(`{}`), span}
	}
	d, err := NewRowDecoder(cfg, cols)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		span  []byte
		want  []schema.Header
		drops []string
	}{
		{[]byte("traceparent=" + tp + "\n"), []schema.Header{{Key: "traceparent", Value: tp}}, nil},
		{nil, nil, nil},
		{[]byte("traceparent=nope"), nil, []string{"traceparent"}},
	} {
		m, err := d.Decode(row(tc.span), schema.Position{}, time.Time{})
		if err != nil {
			t.Fatalf("Decode(%q): %v", tc.span, err)
		}
		if !reflect.DeepEqual(m.Headers, tc.want) || !reflect.DeepEqual(m.SpanContextDrops, tc.drops) {
			t.Errorf("Decode(%q): headers %q, drops %q; want %q, %q", tc.span, m.Headers, m.SpanContextDrops, tc.want, tc.drops)
		}
	}
	if e := CheckColumns(cfg, cols[:5]); e != nil {
		t.Errorf("CheckColumns without the span context column: %v; want nil (optional)", e)
	}
	if _, err := NewRowDecoder(Config{SpanContextColumn: "payload"}, cols); err == nil {
		t.Error("NewRowDecoder with the span context column named payload: nil error; want one")
	}
	if _, err := NewRowDecoder(Config{SpanContextColumn: "bad\x00name"}, cols); err == nil {
		t.Error("NewRowDecoder with a bad span context column name: nil error; want one")
	}
}
