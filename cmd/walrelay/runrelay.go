package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/health"
	"github.com/walrelay/walrelay/internal/kafkasec"
	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/memlimit"
	"github.com/walrelay/walrelay/internal/procs"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/topics"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// startCheckTimeout bounds the start-up checks of PostgreSQL and Kafka.
const startCheckTimeout = 30 * time.Second

func runRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, log, ok, err := parseWithLogger("run", args, stdout, stderr)
	if !ok {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	if discarding {
		log.Warn("discarding build: messages are NOT published (built with -tags walrelay_discard, for benchmarks only)")
	}
	memLimit, memLimitSet := memlimit.Apply(os.Getenv, c.Sink.MaxInFlightBytes)
	// One processor while one is enough, unless GOMAXPROCS chose (DECISIONS 51).
	pctx, stopProcs := context.WithCancel(ctx)
	procsDone := make(chan struct{})
	go func() { defer close(procsDone); procs.Run(pctx, os.Getenv, log) }()
	defer func() { stopProcs(); <-procsDone }()
	if err := warnPostgresTLS(log, c.Slot); err != nil {
		return err
	}
	p, err := buildProcess(c, log)
	if err != nil {
		return err
	}
	defer p.pool.Close()
	if err := preflight(ctx, c, log, p.sinkCfg, p.store, p.topics); err != nil {
		return c.withEntry(err)
	}
	var ln net.Listener
	if c.Metrics != "" {
		if ln, err = net.Listen("tcp", c.Metrics); err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", c.Metrics, err)
		}
	}
	log.Info("walrelay starting", zap.String("version", version()), zap.String("slot", c.Slot.Slot),
		zap.String("publication", c.Slot.Publication), zap.Stringer("table", c.Slot.Table), zap.Strings("kafka_brokers", p.sinkCfg.Brokers),
		zap.Bool("kafka_tls", p.sinkCfg.TLS != nil), zap.String("kafka_sasl", kafkasec.MechanismName(p.sinkCfg.SASL)),
		zap.String("metrics_addr", c.Metrics), zap.String("memory_limit", memlimit.String(memLimit)),
		zap.Bool("memory_limit_default", memLimitSet), zap.String("preset", c.Preset))
	return p.run(ctx, ln)
}

// process is what `walrelay run` runs: the elector, the relay it runs as
// leader, the slot monitor, and the metrics they share.
type process struct {
	reg     *prometheus.Registry
	elector *leader.Elector
	relay   *relay.Relay
	monitor *slot.Monitor
	pool    *pgxpool.Pool // the dead-letter table's connections; the caller closes it
	store   deadLetters
	topics  *topics.Store // the partition count each topic is routed by
	sinkCfg sink.Config
	log     *zap.Logger
}

// buildProcess makes the process's parts; it starts nothing.
func buildProcess(c config, log *zap.Logger) (*process, error) {
	p := &process{reg: health.NewRegistry(version()), log: log}
	var err error
	// One walrelay publishes per slot; the others wait as standbys and take
	// over when it goes.
	if p.elector, err = leader.New(c.Leader, log, p.reg); err != nil {
		return nil, err
	}
	// A few connections for the dead-letter table: the sink parks from its
	// partitions' goroutines.
	if p.pool, err = slot.OpenPool(c.Slot, 4); err != nil {
		return nil, err
	}
	if p.store, err = newDeadLetters(p.pool, c); err != nil {
		p.pool.Close()
		return nil, err
	}
	if p.topics, err = topics.New(p.pool, c.Schema.TopicsTable()); err != nil {
		p.pool.Close()
		return nil, err
	}
	if err := p.buildRelay(c, log); err != nil {
		p.pool.Close()
		return nil, err
	}
	return p, nil
}

// buildRelay makes the sink's configuration, the relay and the monitor
// that watches it.
func (p *process) buildRelay(c config, log *zap.Logger) error {
	var err error
	p.sinkCfg = c.Sink
	if p.sinkCfg.Metrics, err = sink.NewMetrics(p.reg); err != nil {
		return err
	}
	p.sinkCfg.Guard = p.elector.Check
	p.sinkCfg.Layouts = p.topics
	if p.relay, err = buildRelay(c, p.sinkCfg, log, p.reg, p.store); err != nil {
		return err
	}
	if w := kafkasec.Warning(p.sinkCfg.TLS, p.sinkCfg.SASL); w != "" {
		log.Warn(w)
	}
	// The monitor reads the slot's figures for the metrics and the stall
	// watchdog and, while the relay streams, writes heartbeats.
	p.monitor, err = slot.NewMonitor(c.Monitor, log, p.reg, p.relay)
	return err
}

// run runs the parts in one errgroup until ctx ends or one fails: the
// elector (which runs the relay while it leads), the monitor, and, with
// ln, the metrics and health server.
func (p *process) run(ctx context.Context, ln net.Listener) error {
	g, gctx := errgroup.WithContext(ctx)
	relayDone := make(chan struct{})
	// The monitor watches until the relay is done, so that a drain at
	// shutdown stays visible.
	monCtx, stopMon := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error {
		defer close(relayDone)
		defer stopMon()
		return p.elector.Run(gctx, p.relay.Run)
	})
	g.Go(func() error { return p.monitor.Run(monCtx) })
	if ln != nil {
		ready := health.Readiness{Reached: p.monitor.Reached, Leader: p.elector.Check, Streaming: p.relay.Streaming,
			Halted: func() string { return withFlags(p.relay.Halted()) }, Held: p.sinkCfg.Metrics.Held, Stalled: p.monitor.Stalled}
		g.Go(func() error { return health.Serve(ln, p.reg, ready.Check, relayDone, p.log) })
	}
	return g.Wait()
}

// buildRelay wires a relay whose sessions each get a new stream, decoder
// and sink (relay.Sessions); the metrics are made once and shared by the
// sessions. Under --on-bad-message park, the sink parks into store.
func buildRelay(c config, sinkCfg sink.Config, log *zap.Logger, reg prometheus.Registerer, store deadLetters) (*relay.Relay, error) {
	if c.Park {
		sinkCfg.Park = store.Park
	}
	sessions := relay.Sessions{Slot: c.Slot, Decoders: c.decoders(), Sink: sinkCfg, Blockers: store.Blockers, NewPublisher: newPublisher}
	factory, err := sessions.Factory(log, reg)
	if err != nil {
		return nil, err
	}
	relayCfg := c.Relay
	relayCfg.Registerer = reg
	for _, dc := range c.decoders() {
		relayCfg.Tables = append(relayCfg.Tables, dc.Table.String())
	}
	return relay.New(relayCfg, log, factory)
}

// preflight fails fast, before any waiting for leadership, on what no
// retry can mend: PostgreSQL unreachable or not set up, Kafka unreachable.
func preflight(ctx context.Context, c config, log *zap.Logger, sinkCfg sink.Config, store deadLetters, layouts *topics.Store) error {
	checkCtx, cancel := context.WithTimeout(ctx, startCheckTimeout)
	defer cancel()
	if _, err := slot.Preflight(checkCtx, c.Slot, log); err != nil {
		return err
	}
	if err := store.Ready(checkCtx); err != nil {
		return err
	}
	if err := layouts.Ready(checkCtx); err != nil {
		return err
	}
	if discarding {
		return nil // no broker needed: see discard.go
	}
	return sink.Ping(checkCtx, sinkCfg)
}

// deadLetters are the dead-letter stores of the outbox tables, in the
// order of Message.Table: each table parks into its own dead-letter table
// (DECISIONS 46), so that `walrelay dlq --table` and an existing table's
// dead letters stay where they were.
type deadLetters []*dlq.Store

// newDeadLetters opens the store of each of c's outbox tables on db.
func newDeadLetters(db dlq.DB, c config) (deadLetters, error) {
	tables := []schema.Config{c.Schema}
	for _, tc := range c.More {
		tables = append(tables, tc.Schema)
	}
	var out deadLetters
	for _, sc := range tables {
		s, err := dlq.New(db, sc.DeadLetterTable())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Park parks dl into its table's dead-letter table.
func (d deadLetters) Park(ctx context.Context, dl schema.DeadLetter) (bool, error) {
	if dl.Table < 0 || dl.Table >= len(d) {
		return false, fmt.Errorf("park %s: a row of table %d, of %d", dl.Position, dl.Table, len(d))
	}
	return d[dl.Table].Park(ctx, dl)
}

// Blockers are every table's blocked aggregates, each with its table.
func (d deadLetters) Blockers(ctx context.Context) ([]schema.Blocker, error) {
	var out []schema.Blocker
	for i, s := range d {
		bs, err := s.Blockers(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			b.Table = i
			out = append(out, b)
		}
	}
	return out, nil
}

// Ready fails unless every dead-letter table is there.
func (d deadLetters) Ready(ctx context.Context) error {
	for _, s := range d {
		if err := s.Ready(ctx); err != nil {
			return err
		}
	}
	return nil
}
