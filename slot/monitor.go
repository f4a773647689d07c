package slot

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/promreg"
	"github.com/walrelay/walrelay/schema"
)

// MonitorConfig tunes the Monitor.
type MonitorConfig struct {
	// Config names the server and the slot; ConnString, Slot and
	// ConnectTimeout are used, the rest is validated as for a Stream.
	Config
	// PollInterval is how often the slot's figures are read from
	// pg_replication_slots. Defaults to 5s.
	PollInterval time.Duration
	// HeartbeatInterval is how often a heartbeat is written into the WAL
	// while this process streams (pg_logical_emit_message, outside any
	// transaction). 0 writes none.
	HeartbeatInterval time.Duration
	// StallThreshold is how long the confirmed position may stand still
	// while the WAL moves on and nothing is in flight, before the watchdog
	// reports a stall. Defaults to 2m.
	StallThreshold time.Duration
}

// Pipeline is what the Monitor asks of the relay.
type Pipeline interface {
	// Streaming reports that this process replicates from the slot now.
	Streaming() bool
	// Idle reports that nothing is in flight to Kafka.
	Idle() bool
}

// Monitor watches the slot from the server's side over a normal connection
// of its own: it reads the slot's figures on a timer for the metrics and
// the stall watchdog, and, while this process streams, writes heartbeats
// so that the slot keeps moving when the outbox is idle. Every walrelay
// process runs one, standbys included, so the slot stays visible when no
// leader is streaming. Run owns the connection.
type Monitor struct {
	cfg  MonitorConfig
	log  *zap.Logger
	pipe Pipeline

	conn    *pgx.Conn
	failing bool // the last poll failed; Run's goroutine only
	dog     watchdog
	stalled atomic.Bool
	reached atomic.Bool // the last poll read the figures

	mu     sync.Mutex
	fig    Figures
	readAt time.Time

	stalledGauge prometheus.Gauge
	pollErrors   prometheus.Counter
	heartbeats   prometheus.Counter
	beatErrors   prometheus.Counter
}

func (c *MonitorConfig) setMonitorDefaults() {
	c.setDefaults()
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.StallThreshold <= 0 {
		c.StallThreshold = 2 * time.Minute
	}
}

// MonitorDefaults is the MonitorConfig with every optional field at its
// default. HeartbeatInterval has none: zero writes no heartbeats.
func MonitorDefaults() MonitorConfig {
	var c MonitorConfig
	c.setMonitorDefaults()
	return c
}

// NewMonitor validates cfg and registers the Monitor's metrics with reg (a
// nil reg keeps them private). It starts nothing.
func NewMonitor(cfg MonitorConfig, log *zap.Logger, reg prometheus.Registerer, pipe Pipeline) (*Monitor, error) {
	cfg.setMonitorDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Monitor{cfg: cfg, log: log, pipe: pipe, dog: watchdog{threshold: cfg.StallThreshold}}
	m.newMetrics()
	if err := promreg.Register(reg, "slot monitor metrics", m, m.stalledGauge, m.pollErrors, m.heartbeats, m.beatErrors); err != nil {
		return nil, err
	}
	return m, nil
}

// Stalled reports the watchdog's verdict at the last reading.
func (m *Monitor) Stalled() bool { return m.stalled.Load() }

// Reached reports that the last poll read the slot's figures: the server
// answers, and the slot exists.
func (m *Monitor) Reached() bool { return m.reached.Load() }

// Run reads and beats until ctx is done; it returns nil then. Failures to
// reach the server are counted and logged, never fatal: the monitor
// watches, it does not decide.
func (m *Monitor) Run(ctx context.Context) error {
	defer m.close()
	poll := time.NewTicker(m.cfg.PollInterval)
	defer poll.Stop()
	var beat <-chan time.Time
	if m.cfg.HeartbeatInterval > 0 {
		t := time.NewTicker(m.cfg.HeartbeatInterval)
		defer t.Stop()
		beat = t.C
	}
	m.poll(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			m.poll(ctx)
		case <-beat:
			if m.pipe.Streaming() {
				m.heartbeat(ctx)
			}
		}
	}
}

// poll reads the figures and feeds the watchdog.
func (m *Monitor) poll(ctx context.Context) {
	var f Figures
	err := m.query(ctx, func(ctx context.Context, conn *pgx.Conn) (err error) {
		f, err = ReadFigures(ctx, conn, m.cfg.Slot)
		return err
	})
	if err != nil {
		m.pollErrors.Inc()
		m.reached.Store(false)
		if !m.failing && ctx.Err() == nil {
			m.log.Warn("cannot read the slot's figures; the slot metrics are stale until it can", zap.String("slot", m.cfg.Slot), zap.Error(err))
		}
		m.failing = true
		return
	}
	if m.failing {
		m.log.Info("reading the slot's figures again", zap.String("slot", m.cfg.Slot))
		m.failing = false
	}
	m.reached.Store(f.Exists)
	now := time.Now()
	m.mu.Lock()
	m.fig, m.readAt = f, now
	m.mu.Unlock()
	if m.dog.observe(now, f, m.pipe.Streaming(), m.pipe.Idle()) {
		m.report(now, f)
	}
}

func (m *Monitor) report(now time.Time, f Figures) {
	m.stalled.Store(m.dog.stalled)
	if m.dog.stalled {
		m.stalledGauge.Set(1)
		m.log.Error("replication stalled: the WAL moves on but the slot's confirmed position does not, with nothing in flight",
			zap.String("slot", m.cfg.Slot), zap.Stringer("confirmed_flush_lsn", f.ConfirmedFlush),
			zap.Stringer("current_wal_lsn", f.CurrentWAL), zap.Uint64("lag_bytes", f.LagBytes()),
			zap.Duration("standing_still_for", m.dog.standstill(now)))
		return
	}
	m.stalledGauge.Set(0)
	m.log.Info("replication moves again", zap.String("slot", m.cfg.Slot), zap.Stringer("confirmed_flush_lsn", f.ConfirmedFlush))
}

// heartbeat writes one logical message into the WAL of the outbox's
// database. Outside a transaction it is decoded at once, so the stream
// sees its position even when the outbox is idle.
func (m *Monitor) heartbeat(ctx context.Context) {
	err := m.query(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(false, $1::text, $2::text)", schema.HeartbeatPrefix, m.cfg.Slot)
		return err
	})
	if err != nil {
		m.beatErrors.Inc()
		if ctx.Err() == nil {
			m.log.Warn("cannot write a heartbeat", zap.String("slot", m.cfg.Slot), zap.Error(err))
		}
		return
	}
	m.heartbeats.Inc()
}

// query runs fn on the monitor's connection, connecting first if needed,
// bounded by the poll interval (at most 10s); a failed query drops the
// connection so the next one starts afresh.
func (m *Monitor) query(ctx context.Context, fn func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, min(max(m.cfg.PollInterval, time.Second), 10*time.Second))
	defer cancel()
	if m.conn == nil {
		conn, err := connect(ctx, &m.cfg.Config)
		if err != nil {
			return err
		}
		m.conn = conn
	}
	if err := fn(ctx, m.conn); err != nil {
		m.close()
		return err
	}
	return nil
}

func (m *Monitor) close() {
	if m.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		m.conn.Close(ctx)
		m.conn = nil
	}
}
