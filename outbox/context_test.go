package outbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/walrelay/walrelay/schema"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceparentForm(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{tp, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"", false},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false}, // only version 00
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // zero parent id
		{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false},  // short trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
	}
	for _, tt := range tests {
		if got := validTraceparent(tt.in); got != tt.want {
			t.Errorf("validTraceparent(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

func TestHeadersMergeContextAndMessage(t *testing.T) {
	w, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	full := WithCorrelationID(WithTraceparent(bg, tp), "req-1")
	tests := []struct {
		name string
		ctx  context.Context
		own  map[string]string
		want map[string]string // nil: the column is null
	}{
		{"none", bg, nil, nil},
		{"empty own", bg, map[string]string{}, nil},
		{"context only", full, nil, map[string]string{schema.HeaderTraceparent: tp, schema.HeaderCorrelationID: "req-1"}},
		{"own only", bg, map[string]string{"tenant": "t1"}, map[string]string{"tenant": "t1"}},
		{"own wins", full, map[string]string{schema.HeaderCorrelationID: "mine", "tenant": "t1"},
			map[string]string{schema.HeaderTraceparent: tp, schema.HeaderCorrelationID: "mine", "tenant": "t1"}},
		{"malformed traceparent left out", WithCorrelationID(WithTraceparent(bg, "00-xyz"), "req-2"), nil,
			map[string]string{schema.HeaderCorrelationID: "req-2"}},
		{"empty and invalid correlation ids left out", WithCorrelationID(WithTraceparent(bg, tp), "\xff"), nil,
			map[string]string{schema.HeaderTraceparent: tp}},
		{"empty correlation id left out", WithCorrelationID(bg, ""), nil, nil},
		{"later context value wins", WithCorrelationID(full, "req-3"), nil,
			map[string]string{schema.HeaderTraceparent: tp, schema.HeaderCorrelationID: "req-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good()
			m.Headers = tt.own
			rows, err := w.prepare(tt.ctx, []*Message{m})
			if err != nil {
				t.Fatal(err)
			}
			got := decodeHeaders(t, rows[0].headers)
			if len(got) != len(tt.want) || (got == nil) != (tt.want == nil) {
				t.Fatalf("headers %v; want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("header %s = %q; want %q", k, got[k], v)
				}
			}
		})
	}
}

func decodeHeaders(t *testing.T, h any) map[string]string {
	t.Helper()
	if h == nil {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(h.([]byte), &m); err != nil {
		t.Fatalf("headers %s: %v", h, err)
	}
	return m
}
