package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/mail"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/examples/internal/svc"
	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/schema"
)

// tasksTable is where the e-mail tasks live, in the notifier's database.
var tasksTable = schema.Table{Schema: "public", Name: "email_tasks"}

func main() { svc.Main("notifier", run) }

// run wires the notifier and runs it until ctx ends: the consumer (order
// messages into e-mail tasks) and the sender (tasks into e-mails) in one
// errgroup, and the metrics server when asked for.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	log, err := svc.NewLogger(stderr, o.LogLevel)
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
		g.Go(func() error { return svc.ServeMetrics(gctx, ln, reg) })
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
