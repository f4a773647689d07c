package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// NewRegistry is the registry a walrelay process serves on /metrics, with
// the Go runtime's and the process's collectors and walrelay_build_info
// of version registered.
func NewRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(version))
	return reg
}

// buildInfo is walrelay_build_info{version}, always 1.
func buildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "walrelay_build_info",
		Help:        "Always 1; the version label says which walrelay runs.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	g.Set(1)
	return g
}

// shutdownGrace is how long requests under way may finish once the
// server is told to stop; tests shorten it.
var shutdownGrace = 5 * time.Second

// Serve serves /metrics (reg), /healthz (the process answers) and /readyz
// (ready says "" or the reason why not) on ln until done is closed, then
// shuts the server down, giving requests under way shutdownGrace (5s). A
// request still running then is cut, with a warning: the process's work
// is done by then (done closes after the relay stopped and confirmed), and
// a slow scrape must not turn a clean stop into a failed one. It returns
// early only when the server fails.
func Serve(ln net.Listener, reg *prometheus.Registry, ready func() string, done <-chan struct{}, log *zap.Logger) error {
	srv := &http.Server{Handler: handler(reg, ready), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-done:
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		srv.Close() //nolint:errcheck // cut what is left; the listener is closed already
		log.Warn("metrics server: requests still running at the stop were cut", zap.Duration("grace", shutdownGrace), zap.Error(err))
	}
	return nil
}

// handler routes the three endpoints.
func handler(reg *prometheus.Registry, ready func() string) http.Handler {
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
	return mux
}
