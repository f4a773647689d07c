package health

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walrelay/walrelay/sink"
)

// parts is what the process's parts report, for a Readiness of fakes.
type parts struct {
	reached, streaming, stalled bool
	leader                      error
	halted                      string
	held                        []sink.HeldTopic
}

func (p parts) readiness() Readiness {
	return Readiness{
		Reached:   func() bool { return p.reached },
		Leader:    func() error { return p.leader },
		Streaming: func() bool { return p.streaming },
		Halted:    func() string { return p.halted },
		Held:      func() []sink.HeldTopic { return p.held },
		Stalled:   func() bool { return p.stalled },
	}
}

func TestReadiness(t *testing.T) {
	standby := errors.New("standby")
	held := []sink.HeldTopic{{Topic: "outbox.order", Recorded: 3, Kafka: 6}}
	tests := []struct {
		name string
		p    parts
		want string
	}{
		{"leader streaming", parts{reached: true, streaming: true}, ""},
		{"standby", parts{reached: true, leader: standby}, ""},
		{"standby that cannot read the slot", parts{leader: standby}, "cannot read the slot from PostgreSQL"},
		{"leader that cannot read the slot", parts{streaming: true}, "cannot read the slot from PostgreSQL"},
		{"halted", parts{reached: true, halted: "a row over --max-wal-message-bytes"},
			"halted on a message walrelay cannot publish (--on-bad-message halt): a row over --max-wal-message-bytes"},
		{"streaming again after a halt", parts{reached: true, streaming: true, halted: "earlier"}, ""},
		{"leader between sessions", parts{reached: true}, "leader without a streaming replication session"},
		{"held topic, stalled too", parts{reached: true, streaming: true, held: held, stalled: true},
			"publishing nothing to a topic whose partition count changed: outbox.order (recorded 3 partitions, Kafka has 6; walrelay topics accept --topic outbox.order)"},
		{"stalled", parts{reached: true, streaming: true, stalled: true}, "replication stalled"},
	}
	for _, tt := range tests {
		if got := tt.p.readiness().Check(); got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestHeldTextListsEveryTopic(t *testing.T) {
	got := heldText([]sink.HeldTopic{{Topic: "a", Recorded: 1, Kafka: 2}, {Topic: "b", Recorded: 4, Kafka: 8}})
	want := "publishing nothing to a topic whose partition count changed: a (recorded 1 partitions, Kafka has 2; walrelay topics accept --topic a), " +
		"b (recorded 4 partitions, Kafka has 8; walrelay topics accept --topic b)"
	if got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestEndpoints(t *testing.T) {
	why := ""
	h := handler(NewRegistry("v1.2.3"), func() string { return why })
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: got %d %q; want 200 ok", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz ready: got %d %q; want 200 ready", code, body)
	}
	why = "replication stalled"
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || body != "not ready: replication stalled\n" {
		t.Errorf("/readyz not ready: got %d %q; want 503 and the reason", code, body)
	}
	if code, body := get(t, h, "/metrics"); code != http.StatusOK || !strings.Contains(body, `walrelay_build_info{version="v1.2.3"} 1`) {
		t.Errorf("/metrics: got %d, no build info:\n%s", code, body)
	}
}

// Serve answers until done is closed, then returns nil; a listener that
// fails ends it with an error.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ln, NewRegistry("test"), func() string { return "" }, done, zaptest.NewLogger(t))
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok\n" {
		t.Errorf("/healthz: got %q; want ok", body)
	}
	close(done)
	if err := <-errc; err != nil {
		t.Errorf("Serve after done: got %v; want nil", err)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := Serve(ln, NewRegistry("test"), func() string { return "" }, make(chan struct{}), zaptest.NewLogger(t)); err == nil || !strings.HasPrefix(err.Error(), "metrics server: ") {
		t.Errorf("Serve on a closed listener: got %v; want a metrics server error", err)
	}
}

// stuck is a collector whose Collect blocks until release is closed: a
// scrape that hangs.
type stuck struct {
	desc    *prometheus.Desc
	entered chan struct{}
	release chan struct{}
}

func (s *stuck) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }
func (s *stuck) Collect(chan<- prometheus.Metric) {
	close(s.entered)
	<-s.release
}

// A scrape still running when the server stops is cut after the grace,
// with a warning, and Serve returns nil: the stop stays clean.
func TestServeCutsAScrapeStillRunningAtTheStop(t *testing.T) {
	defer func(g time.Duration) { shutdownGrace = g }(shutdownGrace)
	shutdownGrace = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry("test")
	st := &stuck{desc: prometheus.NewDesc("stuck", "blocks", nil, nil), entered: make(chan struct{}), release: make(chan struct{})}
	reg.MustRegister(st)
	defer close(st.release)
	core, logs := observer.New(zap.WarnLevel)
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- Serve(ln, reg, func() string { return "" }, done, zap.New(core)) }()
	go http.Get("http://" + ln.Addr().String() + "/metrics") //nolint:errcheck // cut on purpose
	<-st.entered
	close(done)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Serve with a scrape stuck at the stop: got %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its grace")
	}
	if n := logs.FilterMessageSnippet("were cut").Len(); n != 1 {
		t.Fatalf("warnings about the cut requests: got %d; want 1", n)
	}
}
