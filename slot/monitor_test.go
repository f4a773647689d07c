package slot_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/slot"
)

// pipeline is a hand-set slot.Pipeline.
type pipeline struct{ streaming, idle atomic.Bool }

func (p *pipeline) Streaming() bool { return p.streaming.Load() }
func (p *pipeline) Idle() bool      { return p.idle.Load() }

// gather reads the registry's gauges and counters by name (and label value
// of a one-label family, as name{value}).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			if l := m.GetLabel(); len(l) == 1 {
				name += "{" + l[0].GetValue() + "}"
			}
			if g := m.GetGauge(); g != nil {
				out[name] = g.GetValue()
			} else if c := m.GetCounter(); c != nil {
				out[name] = c.GetValue()
			}
		}
	}
	return out
}

// With nobody consuming the slot, a "streaming, idle" relay whose slot does
// not move while rows are written is a stall; the figures match the
// server's; the heartbeats are written; a busy relay is no stall.
func TestMonitorFiguresHeartbeatsAndStall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	info := f.initSlot()
	pipe := &pipeline{}
	pipe.streaming.Store(true)
	pipe.idle.Store(true)
	reg := prometheus.NewRegistry()
	m, err := slot.NewMonitor(slot.MonitorConfig{Config: f.config(), PollInterval: 50 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond, StallThreshold: 400 * time.Millisecond}, zaptest.NewLogger(t), reg, pipe)
	if err != nil {
		t.Fatalf("NewMonitor: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: got %v; want nil", err)
		}
	}()

	f.insert("one")
	poll.Eventually(t, 10*time.Second, "a stall reported after the slot stopped moving", func() (string, bool) {
		if m.Stalled() {
			return "", true
		}
		return fmt.Sprintf("no stall; metrics %v", gather(t, reg)), false
	})
	got := gather(t, reg)
	wal := f.queryLSN("SELECT pg_current_wal_lsn()::text")
	if lag := got["walrelay_slot_lag_bytes"]; lag <= 0 || lag > float64(wal-info.ConfirmedFlush) {
		t.Errorf("walrelay_slot_lag_bytes: got %v; want in (0, %d]", lag, uint64(wal-info.ConfirmedFlush))
	}
	want := map[string]float64{"walrelay_stalled": 1, "walrelay_slot_active": 0,
		"walrelay_slot_wal_status{reserved}": 1, "walrelay_slot_wal_status{lost}": 0, "walrelay_heartbeat_errors_total": 0}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s: got %v; want %v", name, got[name], v)
		}
	}
	if got["walrelay_heartbeats_total"] < 1 || got["walrelay_slot_retained_wal_bytes"] < got["walrelay_slot_lag_bytes"] {
		t.Errorf("heartbeats %v, retained %v, lag %v; want at least one heartbeat and retained >= lag",
			got["walrelay_heartbeats_total"], got["walrelay_slot_retained_wal_bytes"], got["walrelay_slot_lag_bytes"])
	}

	// Messages in flight: waiting for Kafka is not a stall.
	pipe.idle.Store(false)
	poll.Eventually(t, 5*time.Second, "the verdict lifted with messages in flight", func() (string, bool) {
		return "still stalled", !m.Stalled()
	})
	if got := gather(t, reg)["walrelay_stalled"]; got != 0 {
		t.Errorf("walrelay_stalled after the verdict was lifted: got %v; want 0", got)
	}
}
