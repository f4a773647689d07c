package leader_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// Through a transaction pooler (the rig's PgBouncer, pool_mode=transaction)
// a session lock belongs to a server connection other clients then use:
// the elector finds its session's backend shared and refuses to lead,
// returning the error from Run, never calling lead.
func TestElectorRefusesATransactionPooledSession(t *testing.T) {
	url := rig.Env(t, "WALRELAY_TEST_PGBOUNCER_TX_URL")
	e, err := leader.New(testConfig(url, uniqueSlot()), zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New: got %v; want nil", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var led atomic.Bool
	err = e.Run(ctx, func(context.Context) error { led.Store(true); return nil })
	if err == nil || !strings.Contains(err.Error(), "shares its server backend") || !strings.Contains(err.Error(), "direct endpoint") {
		t.Errorf("Run through a transaction pooler: got %v; want the shared-backend refusal naming the direct endpoint", err)
	}
	if led.Load() {
		t.Errorf("lead was called through a transaction pooler; want never")
	}
}

// Through a session pooler (pool_mode=session) the lock session is its own
// backend: the elector leads, and the lock is the server's, so a node
// connected directly waits while it leads and takes over when it stops.
func TestElectorLeadsThroughASessionPooler(t *testing.T) {
	pooled, direct := rig.Env(t, "WALRELAY_TEST_PGBOUNCER_SESSION_URL"), pgURL(t)
	slot := uniqueSlot()
	var active atomic.Int32
	a := startNode(t, testConfig(pooled, slot), prometheus.NewRegistry(), &active, nil)
	a.waitTerm(t, 5*time.Second)
	b := startNode(t, testConfig(direct, slot), prometheus.NewRegistry(), &active, nil)
	b.noTerm(t, 3*retryInterval)
	if err := a.shutdown(t); err != nil {
		t.Fatalf("Run through the session pooler: got %v; want nil", err)
	}
	b.waitTerm(t, leaseTimeout+slack+retryInterval)
}
