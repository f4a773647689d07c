// Package svc is the process wiring the example services share: signal
// handling and exit codes, JSON logs, a /metrics server. It is what any
// small Go service would have; it holds nothing of the outbox pattern.
package svc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Main runs run with the command line and a context that ends on SIGINT or
// SIGTERM, then exits: 0 when run returned nil or the user asked for
// --help, 1 with "name: error" on stderr otherwise.
func Main(name string, run func(ctx context.Context, args []string, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// NewLogger writes JSON lines at level ("debug", "info", "warn", "error")
// to w.
func NewLogger(w io.Writer, level string) (*zap.Logger, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "time"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	sink := zapcore.Lock(zapcore.AddSync(w))
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(ec), sink, lvl), zap.ErrorOutput(sink)), nil
}

// InfoLogger is NewLogger at info.
func InfoLogger(w io.Writer) *zap.Logger {
	log, _ := NewLogger(w, "info") //nolint:errcheck // a constant, valid level
	return log
}

// ServeMetrics serves reg's metrics at GET /metrics on ln until ctx ends.
func ServeMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics: %w", e)
	}
	return err
}
