// Command warehouse is the example consumer of walrelay's outbox pattern: it
// reads order.submitted.v1 messages from Kafka and creates one stock
// reservation per order, through an inbox (package inbox) that applies each
// message once however often Kafka delivers it: after a crash between the
// database commit and the offset commit, after a replay of the relay, or
// when two instances read the same message at once.
//
//	warehouse --postgres-url postgres://.../warehouse --kafka-brokers 127.0.0.1:9092
//
// See examples/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/examples/internal/svc"
	"github.com/walrelay/walrelay/inbox"
)

func main() { svc.Main("warehouse", run) }

// options are the command line.
type options struct {
	postgresURL    string
	brokers        []string
	topic          string
	group          string
	consumerID     string
	metricsAddr    string
	sessionTimeout time.Duration
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("warehouse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var brokers string
	fs.StringVar(&o.postgresURL, "postgres-url", "", "PostgreSQL URL of the warehouse's own database (required)")
	fs.StringVar(&brokers, "kafka-brokers", "", "Kafka bootstrap brokers, comma-separated (required)")
	fs.StringVar(&o.topic, "topic", "outbox.order", "the topic of the order messages")
	fs.StringVar(&o.group, "group", "warehouse", "the Kafka consumer group")
	fs.StringVar(&o.consumerID, "consumer-id", "warehouse", "the inbox's consumer id: instances with the same id apply each message once between them")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics on this address; empty: off")
	fs.DurationVar(&o.sessionTimeout, "session-timeout", 10*time.Second,
		"the consumer group session timeout: how long a dead instance holds its partitions")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.postgresURL == "" {
		return o, errors.New("--postgres-url is required")
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.brokers = append(o.brokers, b)
		}
	}
	if len(o.brokers) == 0 {
		return o, errors.New("--kafka-brokers is required")
	}
	if o.topic == "" || o.group == "" || o.consumerID == "" {
		return o, errors.New("--topic, --group and --consumer-id must not be empty")
	}
	return o, nil
}

// run is main without the process: it consumes until ctx ends.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	log := svc.InfoLogger(stderr)
	defer log.Sync() //nolint:errcheck // stderr
	db, err := pgxpool.New(ctx, o.postgresURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	in, err := inbox.New(inbox.Config{ConsumerID: o.consumerID, Logger: log, Registerer: reg})
	if err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	if err := migrate(ctx, db, in.DDL()); err != nil {
		return err
	}
	log.Info("warehouse consuming", zap.String("topic", o.topic), zap.String("group", o.group),
		zap.String("consumer_id", o.consumerID))

	g, gctx := errgroup.WithContext(ctx)
	if o.metricsAddr != "" {
		ln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", o.metricsAddr, err)
		}
		g.Go(func() error { return svc.ServeMetrics(gctx, ln, reg) })
	}
	g.Go(func() error {
		// walrelay creates the topic with the first order.
		err := inbox.WaitForTopic(gctx, o.brokers, o.topic, time.Second, func() {
			log.Info("waiting for the topic to exist", zap.String("topic", o.topic))
		})
		if err == nil {
			r := newReader(o, log)
			defer r.Close()
			err = in.Consume(gctx, r, db, reservations{log: log}.handle)
		}
		if ctx.Err() != nil { // asked to stop: not a failure
			return nil
		}
		return fmt.Errorf("consume %s: %w", o.topic, err)
	})
	err = g.Wait()
	log.Info("stopped")
	return err
}
