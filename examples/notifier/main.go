package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/schema"
)

// tasksTable is where the e-mail tasks live, in the notifier's database.
var tasksTable = schema.Table{Schema: "public", Name: "email_tasks"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintf(os.Stderr, "notifier: %v\n", err)
		os.Exit(1)
	}
}

// run wires the notifier and runs it until ctx ends: the consumer (order
// messages into e-mail tasks) and the sender (tasks into e-mails) in one
// errgroup, and the metrics server when asked for.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(o.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	reg := prometheus.NewRegistry()
	pool, err := pgxpool.New(ctx, o.PostgresURL)
	if err != nil {
		return fmt.Errorf("--postgres-url: %w", err)
	}
	defer pool.Close()
	in, ord, snd, err := build(o, log, reg, pool)
	if err != nil {
		return err
	}
	if err := ensureSchema(ctx, pool, in.DDL(), ord.tasks.DDL()); err != nil {
		return err
	}
	var ln net.Listener
	if o.MetricsAddr != "" {
		if ln, err = net.Listen("tcp", o.MetricsAddr); err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", o.MetricsAddr, err)
		}
	}
	log.Info("notifier starting", zap.String("topic", o.Topic), zap.String("group", o.Group),
		zap.String("consumer_id", o.ConsumerID), zap.String("smtp_addr", o.SMTPAddr))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return consume(gctx, o, log, in, pool, ord) })
	g.Go(func() error { return snd.Run(gctx) })
	if ln != nil {
		g.Go(func() error { return serveMetrics(gctx, ln, reg) })
	}
	err = g.Wait()
	log.Info("notifier stopped", zap.Error(err))
	return err
}

// build makes the inbox, the consumer's handler and the sender.
func build(o options, log *zap.Logger, reg *prometheus.Registry, pool *pgxpool.Pool) (*inbox.Inbox, *orders, *sender, error) {
	in, err := inbox.New(inbox.Config{ConsumerID: o.ConsumerID, Logger: log, Registerer: reg})
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, nil, nil, err
	}
	tasks, err := newTaskStore(tasksTable)
	if err != nil {
		return nil, nil, nil, err
	}
	from, err := mail.ParseAddress(o.From)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--from: %w", err)
	}
	snd := &sender{
		db: pool, tasks: tasks, log: log, metrics: m,
		mailer:   &mailer{addr: o.SMTPAddr, from: from, timeout: o.SMTPTimeout},
		retryMin: o.RetryMin, retryMax: o.RetryMax, poll: o.PollInterval, lease: o.Lease,
	}
	return in, &orders{tasks: tasks, log: log, metrics: m}, snd, nil
}

// newLogger writes JSON lines to w at level.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "time"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	sink := zapcore.Lock(zapcore.AddSync(w))
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(ec), sink, lvl), zap.ErrorOutput(sink)), nil
}

// serveMetrics serves /metrics on ln until ctx ends.
func serveMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop metrics server: %w", err)
	}
	return nil
}
