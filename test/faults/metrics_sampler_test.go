//go:build faults

package faults

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// The metrics sampler reads the relay's /metrics every second in the
// background of an outage test, as Prometheus would, so that the test can
// show that the operator's figures move (slot lag and oldest message age
// grow while Kafka is down, then fall) and print what the dashboard's
// queries would have returned.

// The phases of an outage test.
const (
	phaseBefore = "before" // from the relay's start until Kafka stops
	phaseDuring = "during" // until Kafka is asked to start again
	phaseAfter  = "after"  // until the relay's figures show it caught up
)

var metricPhases = []string{phaseBefore, phaseDuring, phaseAfter}

// metricSample is one scrape. A metric the relay did not export then is
// NaN; a scrape that failed is not recorded (the sampler counts it).
type metricSample struct {
	at        time.Time
	phase     string
	lag       float64 // walrelay_slot_lag_bytes
	oldest    float64 // walrelay_oldest_unpublished_message_age_seconds
	published float64 // walrelay_published_messages_total, summed over topics
	inFlight  float64 // walrelay_sink_in_flight_messages
}

// metricSampler scrapes one relay until stop; its goroutine is its own.
type metricSampler struct {
	addr string
	quit chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	phase   string
	samples []metricSample
	failed  int
}

// startMetricSampler scrapes addr every interval, from now in phase
// "before", until stop (or the end of the test).
func startMetricSampler(t *testing.T, addr string, interval time.Duration) *metricSampler {
	t.Helper()
	s := &metricSampler{addr: addr, phase: phaseBefore, quit: make(chan struct{}), done: make(chan struct{})}
	go s.run(interval)
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *metricSampler) run(interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.scrape()
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
	}
}

func (s *metricSampler) scrape() {
	s.mu.Lock()
	phase := s.phase
	s.mu.Unlock()
	at := time.Now()
	sums, err := harness.ScrapeSums(s.addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		return
	}
	value := func(name string) float64 {
		if v, ok := sums[name]; ok {
			return v
		}
		return math.NaN()
	}
	published, ok := sums["walrelay_published_messages_total"]
	if !ok {
		// A counter by topic has no series before its first topic.
		published = 0
	}
	s.samples = append(s.samples, metricSample{at: at, phase: phase,
		lag:       value("walrelay_slot_lag_bytes"),
		oldest:    value("walrelay_oldest_unpublished_message_age_seconds"),
		published: published,
		inFlight:  value("walrelay_sink_in_flight_messages"),
	})
}

// setPhase labels the samples from now on.
func (s *metricSampler) setPhase(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = phase
}

// stop ends the sampling and returns the samples and the failed scrapes.
func (s *metricSampler) stop() ([]metricSample, int) {
	s.once.Do(func() { close(s.quit) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metricSample(nil), s.samples...), s.failed
}

// waitFor waits, at most within, for a sample taken after since for which
// ok holds, and returns it.
func (s *metricSampler) waitFor(since time.Time, within time.Duration, ok func(metricSample) bool) (metricSample, bool) {
	seen := 0
	var found metricSample
	ok2 := poll.Until(within, 200*time.Millisecond, func() bool {
		s.mu.Lock()
		fresh := s.samples[seen:]
		seen = len(s.samples)
		s.mu.Unlock()
		for _, m := range fresh {
			if m.at.After(since) && ok(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found, ok2
}

// phaseFigures is what the dashboard shows for one phase: slot lag and
// oldest message age (max and last), and throughput as
// rate(walrelay_published_messages_total[...]) over the phase would give it.
type phaseFigures struct {
	phase                 string
	samples               int
	length                time.Duration // from the last sample before the phase (or its first) to its last
	lagMax, lagLast       float64
	oldestMax, oldestLast float64
	inFlightMax           float64
	published             float64 // messages acknowledged in the phase
	rate                  float64 // published per second over the phase
	ratePeak              float64 // published per second between two samples, at most
}

// metricFigures sums up the samples by phase, in the order of metricPhases.
// Each phase's throughput counts from the last sample of the phase before.
func metricFigures(samples []metricSample) map[string]phaseFigures {
	out := map[string]phaseFigures{}
	var prev *metricSample
	for _, phase := range metricPhases {
		var in []metricSample
		for _, m := range samples {
			if m.phase == phase {
				in = append(in, m)
			}
		}
		out[phase] = phaseFiguresOf(phase, in, prev)
		if len(in) > 0 {
			prev = &in[len(in)-1]
		}
	}
	return out
}

// phaseFiguresOf sums up the samples in of one phase; prev, when not nil,
// is the sample before them.
func phaseFiguresOf(phase string, in []metricSample, prev *metricSample) phaseFigures {
	nan := math.NaN()
	p := phaseFigures{phase: phase, lagMax: nan, lagLast: nan, oldestMax: nan, oldestLast: nan, inFlightMax: nan,
		published: nan, rate: nan, ratePeak: nan}
	if len(in) == 0 {
		return p
	}
	first, last := in[0], in[len(in)-1]
	if prev != nil {
		first = *prev
	}
	p.samples, p.length = len(in), last.at.Sub(first.at)
	p.lagLast, p.oldestLast = last.lag, last.oldest
	p.published = last.published - first.published
	if p.length > 0 {
		p.rate = p.published / p.length.Seconds()
	}
	base := first
	for _, m := range in {
		p.lagMax, p.oldestMax, p.inFlightMax = nanMax(p.lagMax, m.lag), nanMax(p.oldestMax, m.oldest), nanMax(p.inFlightMax, m.inFlight)
		if dt := m.at.Sub(base.at).Seconds(); dt > 0 {
			p.ratePeak = nanMax(p.ratePeak, (m.published-base.published)/dt)
		}
		base = m
	}
	return p
}

// nanMax is the larger of a and b where NaN (no value) loses to any value.
func nanMax(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return max(a, b)
}

// metricTable renders the figures for the test log.
func metricTable(figs map[string]phaseFigures) string {
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "phase\tlength\tsamples\tlag max\tlag last\toldest age max\toldest age last\tin flight max\tpublished\tmsgs/s\tmsgs/s peak\t")
	for _, phase := range metricPhases {
		p := figs[phase]
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.phase, p.length.Round(time.Second), p.samples,
			metricBytes(p.lagMax), metricBytes(p.lagLast), metricSeconds(p.oldestMax), metricSeconds(p.oldestLast),
			metricNumber(p.inFlightMax, "%.0f"), metricNumber(p.published, "%.0f"), metricNumber(p.rate, "%.1f"), metricNumber(p.ratePeak, "%.0f"))
	}
	w.Flush()
	return sb.String()
}

// metricBytes writes n bytes in IEC units, "-" for no value.
func metricBytes(n float64) string {
	if math.IsNaN(n) {
		return "-"
	}
	units := []string{"B", "KiB", "MiB", "GiB"}
	i := 0
	for ; math.Abs(n) >= 1024 && i < len(units)-1; i++ {
		n /= 1024
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

func metricSeconds(v float64) string { return metricNumber(v, "%.1fs") }

func metricNumber(v float64, format string) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

const (
	// outageLagRise is how far, at least, the slot lag's maximum while
	// Kafka is down must lie above its maximum before: both this many
	// times and outageRecoveredLag twice over, so that its fall after the
	// outage is plain to see.
	outageLagRise = 5
	// outageRecoveredLag and outageRecoveredAge are the slot lag and the
	// oldest message age the metrics must fall below once the relay caught
	// up.
	outageRecoveredLag = 512 << 10
	outageRecoveredAge = 5.0 // seconds
)

// outageTimes are the moments of a Kafka outage.
type outageTimes struct {
	down    time.Time // Kafka stopped
	restart time.Time // asked to start again
	back    time.Time // answering again
}

// outageRecovered reports whether a sample shows a relay that caught up.
func outageRecovered(m metricSample) bool {
	return m.lag < outageRecoveredLag && m.oldest < outageRecoveredAge
}

// checkOutageMetrics logs the dashboard's figures by phase and checks that
// they moved with the outage: lag and oldest age grew while Kafka was down
// and nothing was published; after it, they fell and publishing resumed.
func checkOutageMetrics(t *testing.T, fault string, samples []metricSample, failed int, at outageTimes, length time.Duration) {
	t.Helper()
	figs := metricFigures(samples)
	t.Logf("%s: metrics by phase (%d scrapes, %d failed; kafka down %s, asked to start %s later, answering %s later):\n%s",
		fault, len(samples), failed, at.down.Format(time.TimeOnly), at.restart.Sub(at.down).Round(time.Second),
		at.back.Sub(at.down).Round(time.Second), metricTable(figs))
	before, during, after := figs[phaseBefore], figs[phaseDuring], figs[phaseAfter]
	if !(during.lagMax >= outageLagRise*before.lagMax && during.lagMax >= before.lagMax+2*outageRecoveredLag) {
		t.Errorf("walrelay_slot_lag_bytes at most %s while Kafka was down; want at least %dx and %s above its maximum before, %s",
			metricBytes(during.lagMax), outageLagRise, metricBytes(2*outageRecoveredLag), metricBytes(before.lagMax))
	}
	if !(during.oldestMax >= length.Seconds()/2) {
		t.Errorf("walrelay_oldest_unpublished_message_age_seconds at most %s while Kafka was down for %s; want at least half of that",
			metricSeconds(during.oldestMax), length.Round(time.Second))
	}
	checkOutageUnpublished(t, samples, at, length)
	var back *metricSample
	for _, m := range samples {
		if m.phase == phaseAfter && outageRecovered(m) {
			back = &m
			break
		}
	}
	if back == nil {
		t.Errorf("after Kafka was back: no sample with walrelay_slot_lag_bytes under %s and walrelay_oldest_unpublished_message_age_seconds under %s; want the relay's figures to fall once it caught up (last: %s, %s)",
			metricBytes(outageRecoveredLag), metricSeconds(outageRecoveredAge), metricBytes(after.lagLast), metricSeconds(after.oldestLast))
	} else {
		t.Logf("%s: metrics fell to lag %s, oldest age %s %s after kafka was back", fault, metricBytes(back.lag), metricSeconds(back.oldest),
			back.at.Sub(at.back).Round(time.Second))
	}
	if !(after.published > 0) {
		t.Errorf("walrelay_published_messages_total rose by %s after Kafka was back; want it to rise", metricNumber(after.published, "%.0f"))
	}
}

// checkOutageUnpublished checks that walrelay_published_messages_total
// stood still while Kafka was down: from the settle time after the stop
// (acknowledgements already on their way) until the restart was asked.
func checkOutageUnpublished(t *testing.T, samples []metricSample, at outageTimes, length time.Duration) {
	t.Helper()
	var still []metricSample
	for _, m := range samples {
		if m.phase == phaseDuring && !m.at.Before(at.down.Add(outageSettle)) {
			still = append(still, m)
		}
	}
	if want := int(length.Seconds() / 2); len(still) < want {
		t.Errorf("%d samples of /metrics while Kafka was down for %s; want at least %d (one a second, half of them)", len(still), length.Round(time.Second), want)
		return
	}
	first, last := still[0], still[len(still)-1]
	if math.IsNaN(first.published) || last.published != first.published {
		t.Errorf("walrelay_published_messages_total went from %s to %s while Kafka was down (%s to %s after the stop); want it to stand still",
			metricNumber(first.published, "%.0f"), metricNumber(last.published, "%.0f"),
			first.at.Sub(at.down).Round(time.Second), last.at.Sub(at.down).Round(time.Second))
	}
}

// TestMetricFigures checks the sums of the table on made-up samples: no
// services needed.
func TestMetricFigures(t *testing.T) {
	parallel(t)
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	nan := math.NaN()
	sample := func(s int, phase string, lag, oldest, published float64) metricSample {
		return metricSample{at: t0.Add(time.Duration(s) * time.Second), phase: phase, lag: lag, oldest: oldest, published: published, inFlight: nan}
	}
	figs := metricFigures([]metricSample{
		sample(0, phaseBefore, nan, 0, 0),
		sample(1, phaseBefore, 2000, 0, 100),
		sample(2, phaseBefore, 1000, 0.2, 300),
		sample(3, phaseDuring, 5000, 1, 310),
		sample(5, phaseDuring, 9000, 3, 310),
		sample(6, phaseAfter, 4000, 4, 1310),
		sample(8, phaseAfter, 0, 0, 1510),
	})
	for _, c := range []struct {
		phase                                           string
		lagMax, lagLast, oldestMax, published, rate, pk float64
	}{
		{phaseBefore, 2000, 1000, 0.2, 300, 150, 200},
		{phaseDuring, 9000, 9000, 3, 10, 10.0 / 3, 10},
		{phaseAfter, 4000, 0, 4, 1200, 400, 1000},
	} {
		p := figs[c.phase]
		got := []float64{p.lagMax, p.lagLast, p.oldestMax, p.published, p.rate, p.ratePeak}
		want := []float64{c.lagMax, c.lagLast, c.oldestMax, c.published, c.rate, c.pk}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Errorf("%s: got lag max, lag last, oldest max, published, rate, peak rate %v; want %v", c.phase, got, want)
				break
			}
		}
	}
	if got := metricBytes(3 << 19); got != "1.5 MiB" {
		t.Errorf("got metricBytes(1.5 MiB) = %q; want %q", got, "1.5 MiB")
	}
}
