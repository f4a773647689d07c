package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/kafkasec"
	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/topics"
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
	memLimit, memLimitSet := applyMemoryLimit(os.Getenv, c.Sink.MaxInFlightBytes)
	if err := warnPostgresTLS(log, c.Slot.ConnString); err != nil {
		return err
	}
	p, err := buildProcess(c, log)
	if err != nil {
		return err
	}
	defer p.pool.Close()
	if err := preflight(ctx, c, log, p.sinkCfg, p.store, p.topics); err != nil {
		return err
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
		zap.String("metrics_addr", c.Metrics), zap.String("memory_limit", memoryLimitField(memLimit)),
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
	store   *dlq.Store
	topics  *topics.Store // the partition count each topic is routed by
	sinkCfg sink.Config
}

// buildProcess makes the process's parts; it starts nothing.
func buildProcess(c config, log *zap.Logger) (*process, error) {
	p := &process{reg: prometheus.NewRegistry()}
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo())
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
	if p.store, err = dlq.New(p.pool, c.Schema.DeadLetterTable()); err != nil {
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
		ready := readiness{leader: p.elector.Check, relay: p.relay, monitor: p.monitor, held: p.sinkCfg.Metrics.Held}
		g.Go(func() error { return serveMetrics(ln, p.reg, ready.check, relayDone) })
	}
	return g.Wait()
}

// buildRelay wires a relay whose sessions each get a new stream, decoder
// and sink; the metrics are made once and shared by the sessions.
// Under --on-bad-message park, the sink parks into store (messages it
// cannot publish and rows the decoder could not decode alike); under halt
// nothing is parked, but the aggregates parked earlier stay blocked.
func buildRelay(c config, sinkCfg sink.Config, log *zap.Logger, reg prometheus.Registerer, store *dlq.Store) (*relay.Relay, error) {
	decCfg := c.Decoder
	if _, err := decoder.New(decCfg); err != nil {
		return nil, err
	}
	relayCfg := c.Relay
	relayCfg.Registerer = reg
	if c.Park {
		sinkCfg.Park = store.Park
	}
	// The relay streams only as the leader, so whoever else holds the slot
	// is a stale leader: take the slot over rather than wait out its
	// wal_sender_timeout.
	sc := c.Slot
	sc.TakeOver = true
	slotMetrics := slot.NewMetrics(reg)
	factory := func(ctx context.Context, ack func(uint64)) (relay.Parts, error) {
		blocked, err := store.Blockers(ctx)
		if err != nil {
			return relay.Parts{}, err
		}
		stream, err := slot.New(sc, log, slotMetrics)
		if err != nil {
			return relay.Parts{}, err
		}
		dec, err := decoder.New(decCfg)
		if err != nil {
			return relay.Parts{}, err
		}
		cfg := sinkCfg
		cfg.Blocked = blocked
		pub, err := newPublisher(cfg, log, ack)
		if err != nil {
			return relay.Parts{}, err
		}
		return relay.Parts{Stream: stream, Decoder: dec, Publisher: pub}, nil
	}
	return relay.New(relayCfg, log, factory)
}

// preflight fails fast, before any waiting for leadership, on what no
// retry can mend: PostgreSQL unreachable or not set up, Kafka unreachable.
func preflight(ctx context.Context, c config, log *zap.Logger, sinkCfg sink.Config, store *dlq.Store, layouts *topics.Store) error {
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

// readiness is /readyz: a standby is ready (it waits for leadership, as it
// should); the leader is ready while its replication session streams, no
// topic is held and the watchdog sees no stall; nobody is ready who cannot
// read the slot.
type readiness struct {
	leader  func() error
	relay   *relay.Relay
	monitor *slot.Monitor
	held    func() []sink.HeldTopic
}

// check returns "" when ready, else the reason.
func (r readiness) check() string {
	switch {
	case !r.monitor.Reached():
		return "cannot read the slot from PostgreSQL"
	case r.leader() != nil:
		return ""
	case !r.relay.Streaming() && r.relay.Halted() != "":
		return "halted on a message walrelay cannot publish (--on-bad-message halt): " + withFlags(r.relay.Halted())
	case !r.relay.Streaming():
		return "leader without a streaming replication session"
	}
	if held := r.held(); len(held) > 0 {
		return heldText(held) // the cause of the stall that follows
	}
	if r.monitor.Stalled() {
		return "replication stalled"
	}
	return ""
}

// heldText says which topics are held and what releases them.
func heldText(held []sink.HeldTopic) string {
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = fmt.Sprintf("%s (recorded %d partitions, Kafka has %d; walrelay topics accept --topic %s)", h.Topic, h.Recorded, h.Kafka, h.Topic)
	}
	return "publishing nothing to a topic whose partition count changed: " + strings.Join(parts, ", ")
}

// serveMetrics serves /metrics, /healthz (the process answers) and /readyz
// (ready says "" or the reason why not) on ln until done is closed.
func serveMetrics(ln net.Listener, reg *prometheus.Registry, ready func() string, done <-chan struct{}) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := ready(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-done:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop metrics server: %w", err)
	}
	return nil
}

// buildInfo is walrelay_build_info{version}, always 1.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "walrelay_build_info",
		Help:        "Always 1; the version label says which walrelay runs.",
		ConstLabels: prometheus.Labels{"version": version()},
	})
	g.Set(1)
	return g
}
