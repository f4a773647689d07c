package outbox

import (
	"context"

	"github.com/walrelay/walrelay/schema"
)

// ctxKey keys the values this package keeps in a context.
type ctxKey int

const (
	traceparentKey ctxKey = iota
	correlationIDKey
)

// WithTraceparent returns ctx carrying a W3C traceparent
// ("00-<trace-id>-<parent-id>-<flags>") for Write to put into the headers.
//
// It checks nothing; Write leaves out (does not write) a value that is not
// a version-00 traceparent: "00-", 32 lower-case hex digits (not all zero),
// "-", 16 lower-case hex digits (not all zero), "-", 2 lower-case hex
// digits. A malformed trace context would only confuse the consumers'
// tracing, and failing the business transaction over it would be worse.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey, traceparent)
}

// WithCorrelationID returns ctx carrying a correlation id for Write to put
// into the headers. Write leaves out an empty id, and one PostgreSQL's text
// cannot hold (invalid UTF-8, a NUL byte).
func WithCorrelationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, correlationIDKey, id)
}

// contextHeaders are the headers Write takes from ctx, nil when none.
func contextHeaders(ctx context.Context) map[string]string {
	var h map[string]string
	if tp, _ := ctx.Value(traceparentKey).(string); validTraceparent(tp) {
		h = map[string]string{schema.HeaderTraceparent: tp}
	}
	if id, _ := ctx.Value(correlationIDKey).(string); id != "" && checkText(id) == "" {
		if h == nil {
			h = map[string]string{}
		}
		h[schema.HeaderCorrelationID] = id
	}
	return h
}

// validTraceparent reports whether s is a version-00 W3C traceparent with
// a non-zero trace id and parent id.
func validTraceparent(s string) bool {
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	return lowerHex(s[3:35]) && lowerHex(s[36:52]) && lowerHex(s[53:55]) &&
		!allZero(s[3:35]) && !allZero(s[36:52])
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
