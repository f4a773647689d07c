package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/idempotency"
	"github.com/walrelay/walrelay/outbox"
)

// Limits of a request.
const (
	maxBodyBytes = 64 << 10
	maxKeyLen    = 255
	maxItems     = 100
)

// commandTimeout bounds one SubmitOrder command. The command runs detached
// from the client's connection: a client that gives up (a timeout) does not
// cancel a command half-way; it finishes and stores its response, which the
// client's retry then receives.
const commandTimeout = 15 * time.Second

// order is a validated POST /orders body.
type order struct {
	CustomerEmail string             `json:"customer_email"`
	Items         []orderevents.Item `json:"items"`
}

// submitFunc runs SubmitOrder once per key: store.submit in the service, a
// fake in the handler's tests.
type submitFunc func(ctx context.Context, key string, fingerprint []byte, o order) (response []byte, replayed bool, err error)

// handler serves the HTTP API.
type handler struct {
	submit submitFunc
	ping   func(context.Context) error
	log    *zap.Logger
}

func (h *handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", h.submitOrder)
	mux.HandleFunc("GET /healthz", h.healthz)
	return mux
}

// submitOrder is POST /orders: 201 with {"order_id", "message_id"}, the
// same answer with Idempotent-Replayed: true for a retry, 400 for a bad
// request, 422 for a key already used with another body.
func (h *handler) submitOrder(w http.ResponseWriter, r *http.Request) {
	correlation := r.Header.Get("X-Request-Id")
	if correlation == "" {
		correlation = newRequestID()
	}
	w.Header().Set("X-Request-Id", correlation)
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > maxKeyLen {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the Idempotency-Key header is required (1 to %d bytes)", maxKeyLen))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("read the body (at most %d bytes): %v", maxBodyBytes, err))
		return
	}
	o, err := parseOrder(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	fingerprint := sha256.Sum256(body)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), commandTimeout)
	defer cancel()
	ctx = outbox.WithCorrelationID(ctx, correlation)
	if tp := r.Header.Get("traceparent"); tp != "" {
		ctx = outbox.WithTraceparent(ctx, tp)
	}
	resp, replayed, err := h.submit(ctx, key, fingerprint[:], o)
	log := h.log.With(zap.String("idempotency_key", key), zap.String("correlation_id", correlation))
	switch {
	case errors.Is(err, idempotency.ErrKeyReused):
		writeError(w, http.StatusUnprocessableEntity, "this Idempotency-Key was already used for a different request")
		return
	case err != nil:
		log.Error("submit order failed", zap.Error(err))
		writeError(w, http.StatusInternalServerError, "the order could not be stored; retry with the same Idempotency-Key")
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	log.Info("order accepted", zap.Bool("replayed", replayed))
	writeJSON(w, http.StatusCreated, resp)
}

// healthz answers 200 when the database answers.
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.ping(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, "database unreachable")
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// parseOrder decodes and validates a body: a customer e-mail address and 1
// to maxItems items, each with a SKU and a positive quantity; no unknown
// fields, nothing after the object.
func parseOrder(body []byte) (order, error) {
	var o order
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return order{}, fmt.Errorf("the body is not an order: %v", err)
	}
	if dec.More() {
		return order{}, errors.New("the body holds more than one JSON value")
	}
	if a, err := mail.ParseAddress(o.CustomerEmail); err != nil || a.Address != o.CustomerEmail {
		return order{}, fmt.Errorf("customer_email %q is not an e-mail address", o.CustomerEmail)
	}
	if len(o.Items) == 0 || len(o.Items) > maxItems {
		return order{}, fmt.Errorf("items: %d; want 1 to %d", len(o.Items), maxItems)
	}
	for i, it := range o.Items {
		if it.SKU == "" {
			return order{}, fmt.Errorf("items[%d]: the sku is empty", i)
		}
		if it.Quantity < 1 {
			return order{}, fmt.Errorf("items[%d]: quantity %d; want at least 1", i, it.Quantity)
		}
	}
	return o, nil
}

func writeError(w http.ResponseWriter, status int, msg string) {
	body, err := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	if err != nil { // a string always encodes
		body = []byte(`{"error":"internal error"}`)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone; nothing to do
}

// newRequestID is a random correlation id for a request that brought none.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
