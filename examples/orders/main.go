// Command orders is the example order service of walrelay's outbox pattern:
// POST /orders takes an order under an Idempotency-Key and, in one
// transaction, stores the order, its outbox message (order.submitted.v1) and
// the key with the response. walrelay publishes the message to Kafka; the
// warehouse example consumes it. A retried request (a lost response, a
// client timeout) gets the stored response back and creates nothing.
//
//	orders --postgres-url postgres://... [--listen 127.0.0.1:8080]
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
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/examples/internal/svc"
	"github.com/walrelay/walrelay/schema"
)

func main() { svc.Main("orders", run) }

// options are the command line.
type options struct {
	postgresURL      string
	listen           string
	outboxTable      schema.Table
	publication      string
	ordersTable      schema.Table
	idempotencyTable schema.Table
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var outboxTable, ordersTable, keysTable string
	fs.StringVar(&o.postgresURL, "postgres-url", "", "PostgreSQL URL of the service's database (required)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&outboxTable, "outbox-table", "public.outbox_messages", "the outbox table walrelay reads")
	fs.StringVar(&o.publication, "publication", "walrelay_outbox", "the publication the migration creates for the outbox table when it is missing")
	fs.StringVar(&ordersTable, "orders-table", "public.orders", "the orders table")
	fs.StringVar(&keysTable, "idempotency-table", "public.idempotency_keys", "the idempotency keys table")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.postgresURL == "" {
		return o, errors.New("--postgres-url is required")
	}
	var err error
	if o.outboxTable, err = schema.ParseTable(outboxTable); err != nil {
		return o, fmt.Errorf("--outbox-table: %w", err)
	}
	if o.ordersTable, err = schema.ParseTable(ordersTable); err != nil {
		return o, fmt.Errorf("--orders-table: %w", err)
	}
	if o.idempotencyTable, err = schema.ParseTable(keysTable); err != nil {
		return o, fmt.Errorf("--idempotency-table: %w", err)
	}
	return o, nil
}

// run is main without the process: it serves until ctx ends, then drains
// the requests in flight.
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
	s, err := newStore(db, o)
	if err != nil {
		return err
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	h := &handler{submit: s.submit, ping: db.Ping, log: log}
	log.Info("orders service listening", zap.String("addr", ln.Addr().String()),
		zap.Stringer("orders_table", o.ordersTable), zap.Stringer("outbox_table", o.outboxTable))
	return serve(ctx, ln, h.routes(), log)
}

// serve runs the HTTP server on ln until ctx ends, then shuts it down,
// letting the requests in flight finish (up to 10s).
func serve(ctx context.Context, ln net.Listener, h http.Handler, log *zap.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down http: %w", err)
	}
	<-errc // http.ErrServerClosed
	log.Info("stopped")
	return nil
}
