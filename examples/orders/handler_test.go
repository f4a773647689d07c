package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/idempotency"
)

func TestParseOrder(t *testing.T) {
	good := `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":2},{"sku":"B","quantity":1}]}`
	o, err := parseOrder([]byte(good))
	if err != nil {
		t.Fatalf("parseOrder(%s): %v", good, err)
	}
	if o.CustomerEmail != "ann@example.com" || len(o.Items) != 2 || o.Items[0].SKU != "A" || o.Items[0].Quantity != 2 {
		t.Fatalf("parseOrder(%s) = %+v", good, o)
	}
	bad := map[string]string{
		"not json":        `{"customer_email":`,
		"unknown field":   `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":1}],"coupon":"X"}`,
		"two values":      `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":1}]} {}`,
		"no email":        `{"items":[{"sku":"A","quantity":1}]}`,
		"bad email":       `{"customer_email":"ann","items":[{"sku":"A","quantity":1}]}`,
		"named email":     `{"customer_email":"Ann <ann@example.com>","items":[{"sku":"A","quantity":1}]}`,
		"no items":        `{"customer_email":"ann@example.com","items":[]}`,
		"empty sku":       `{"customer_email":"ann@example.com","items":[{"sku":"","quantity":1}]}`,
		"zero quantity":   `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":0}]}`,
		"string quantity": `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":"1"}]}`,
		"too many items":  `{"customer_email":"ann@example.com","items":[` + strings.Repeat(`{"sku":"A","quantity":1},`, maxItems) + `{"sku":"A","quantity":1}]}`,
	}
	for name, body := range bad {
		if _, err := parseOrder([]byte(body)); err == nil {
			t.Errorf("%s: parseOrder(%.60s) = nil error; want one", name, body)
		}
	}
}

// fakeSubmit records its calls and answers like the idempotency store: the
// first call per key runs, a repeat with the same fingerprint replays, one
// with another fingerprint is ErrKeyReused.
type fakeSubmit struct {
	calls  int
	stored map[string][2]string // key: fingerprint, response
	err    error
}

func (f *fakeSubmit) submit(ctx context.Context, key string, fp []byte, o order) ([]byte, bool, error) {
	f.calls++
	if f.err != nil {
		return nil, false, f.err
	}
	if s, ok := f.stored[key]; ok {
		if s[0] != string(fp) {
			return nil, false, idempotency.ErrKeyReused
		}
		return []byte(s[1]), true, nil
	}
	resp := `{"order_id":"o-` + key + `","message_id":"m-` + key + `"}`
	f.stored[key] = [2]string{string(fp), resp}
	return []byte(resp), false, nil
}

func post(t *testing.T, h http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	r.Header.Set("X-Request-Id", "req-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestSubmitOrder(t *testing.T) {
	f := &fakeSubmit{stored: map[string][2]string{}}
	h := (&handler{submit: f.submit, log: zaptest.NewLogger(t)}).routes()
	body := `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":2}]}`

	first := post(t, h, "k1", body)
	if first.Code != http.StatusCreated || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first POST: status %d, Idempotent-Replayed %q; want 201 and none", first.Code, first.Header().Get("Idempotent-Replayed"))
	}
	if got := first.Header().Get("X-Request-Id"); got != "req-1" {
		t.Errorf("X-Request-Id = %q; want req-1", got)
	}
	fp := sha256.Sum256([]byte(body))
	if f.stored["k1"][0] != string(fp[:]) {
		t.Errorf("fingerprint is not the sha256 of the body")
	}
	again := post(t, h, "k1", body)
	if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("replay: status %d, Idempotent-Replayed %q, body %s; want 201, true, %s",
			again.Code, again.Header().Get("Idempotent-Replayed"), again.Body, first.Body)
	}
	other := post(t, h, "k1", strings.Replace(body, "2}", "3}", 1))
	wantError(t, other, http.StatusUnprocessableEntity)
	wantError(t, post(t, h, "", body), http.StatusBadRequest)
	wantError(t, post(t, h, "k2", `{"customer_email":"ann@example.com","items":[]}`), http.StatusBadRequest)
	if f.calls != 3 {
		t.Errorf("submit calls = %d; want 3 (bad requests never reach it)", f.calls)
	}
	f.err = errors.New("connection refused")
	wantError(t, post(t, h, "k3", body), http.StatusInternalServerError)
}

func wantError(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	var e struct{ Error string }
	if w.Code != status || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
		t.Errorf("status %d, body %s; want %d with a JSON error", w.Code, w.Body, status)
	}
}
