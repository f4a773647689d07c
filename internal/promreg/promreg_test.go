package promreg

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
}

func TestRegisterIsAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := Register(reg, "first", counter("a_total")); err != nil {
		t.Fatal(err)
	}
	err := Register(reg, "second", counter("b_total"), counter("a_total"))
	if err == nil || !strings.Contains(err.Error(), "register second: ") {
		t.Fatalf("registering a_total twice: got %v; want an error naming the second", err)
	}
	// b_total was taken back: registering it again works.
	if err := Register(reg, "third", counter("b_total")); err != nil {
		t.Errorf("b_total after the failed registration: %v; want it unregistered", err)
	}
	if err := Register(nil, "private", counter("a_total")); err != nil {
		t.Errorf("nil registerer: %v", err)
	}
}

func TestSharedReturnsTheFirst(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := Shared(reg, "inbox", prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"consumer"}))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Shared(reg, "inbox", prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"consumer"}))
	if err != nil || second != first {
		t.Errorf("second registration: %v, same=%v; want the first collector back", err, second == first)
	}
	if _, err := Shared(reg, "inbox", counter("x_total")); err == nil {
		t.Errorf("a counter under a counter vec's name: no error")
	}
}
