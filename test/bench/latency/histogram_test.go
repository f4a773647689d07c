//go:build bench

package latency

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// histogram is one scrape of a Prometheus histogram: cumulative counts by
// upper bound, ascending, the last bound +Inf.
type histogram struct {
	bounds []float64
	counts []float64
}

// scrapeHistogram reads the histogram name from the /metrics of addr. The
// harness's ScrapeSums sums series over their labels, which folds a
// histogram's buckets into one number; here each le stays apart.
func scrapeHistogram(addr, name string) (histogram, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return histogram{}, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return histogram{}, fmt.Errorf("scrape %s: status %s", addr, resp.Status)
	}
	byBound := map[float64]float64{}
	prefix := name + `_bucket{le="`
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		le, rest, ok := strings.Cut(line[len(prefix):], `"}`)
		fields := strings.Fields(rest)
		if !ok || len(fields) == 0 {
			return histogram{}, fmt.Errorf("scrape %s: bad bucket line %q", addr, line)
		}
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses to +Inf
		if err != nil {
			return histogram{}, fmt.Errorf("scrape %s: bucket bound in %q: %w", addr, line, err)
		}
		n, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return histogram{}, fmt.Errorf("scrape %s: bucket count in %q: %w", addr, line, err)
		}
		byBound[bound] = n
	}
	if err := sc.Err(); err != nil {
		return histogram{}, fmt.Errorf("scrape %s: %w", addr, err)
	}
	if len(byBound) == 0 {
		return histogram{}, fmt.Errorf("scrape %s: no %s buckets", addr, name)
	}
	var h histogram
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	sort.Float64s(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h, nil
}

// since is h minus an earlier scrape of the same histogram: the
// observations made between the two.
func (h histogram) since(earlier histogram) (histogram, error) {
	if len(earlier.bounds) != len(h.bounds) {
		return histogram{}, fmt.Errorf("histogram buckets changed between scrapes: %v, then %v", earlier.bounds, h.bounds)
	}
	d := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		if earlier.bounds[i] != h.bounds[i] {
			return histogram{}, fmt.Errorf("histogram buckets changed between scrapes: %v, then %v", earlier.bounds, h.bounds)
		}
		d.counts[i] = h.counts[i] - earlier.counts[i]
	}
	return d, nil
}

// total is the number of observations.
func (h histogram) total() float64 { return h.counts[len(h.counts)-1] }

// fractionWithin is the share of observations at or below bound, which
// must be one of the bucket bounds: then it is exact, not an estimate.
func (h histogram) fractionWithin(bound float64) (float64, error) {
	for i, b := range h.bounds {
		if b == bound {
			if h.total() == 0 {
				return math.NaN(), nil
			}
			return h.counts[i] / h.total(), nil
		}
	}
	return 0, fmt.Errorf("%g is not a bucket bound of %v", bound, h.bounds)
}

// estimate is a quantile estimated from bucket counts.
type estimate struct {
	value  float64 // linear interpolation within the bucket, in seconds
	lo, hi float64 // the bucket's bounds: the true quantile lies in (lo, hi]
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: find the bucket holding rank q*total and interpolate linearly
// within it, the first bucket starting at 0. A quantile in the +Inf
// bucket is reported as its lower bound with hi = +Inf. With no
// observations the value is NaN.
func (h histogram) quantile(q float64) estimate {
	total := h.total()
	if total == 0 {
		return estimate{value: math.NaN(), lo: math.NaN(), hi: math.NaN()}
	}
	rank := q * total
	lo, below := 0.0, 0.0
	for i, hi := range h.bounds {
		n := h.counts[i]
		if n >= rank && n > below {
			if math.IsInf(hi, 1) {
				return estimate{value: lo, lo: lo, hi: hi}
			}
			return estimate{value: lo + (hi-lo)*(rank-below)/(n-below), lo: lo, hi: hi}
		}
		lo, below = hi, n
	}
	return estimate{value: lo, lo: lo, hi: math.Inf(1)}
}

func TestHistogramQuantile(t *testing.T) {
	h := histogram{
		bounds: []float64{.01, .025, .05, .1, math.Inf(1)},
		counts: []float64{50, 90, 99, 100, 100},
	}
	tests := []struct {
		q              float64
		want           float64
		wantLo, wantHi float64
	}{
		{q: .5, want: .01, wantLo: 0, wantHi: .01},
		{q: .25, want: .005, wantLo: 0, wantHi: .01},
		{q: .7, want: .0175, wantLo: .01, wantHi: .025},
		{q: .99, want: .05, wantLo: .025, wantHi: .05},
		{q: .999, want: .095, wantLo: .05, wantHi: .1},
	}
	for _, tt := range tests {
		got := h.quantile(tt.q)
		if math.Abs(got.value-tt.want) > 1e-12 || got.lo != tt.wantLo || got.hi != tt.wantHi {
			t.Errorf("quantile(%g) = %+v; want %g in (%g, %g]", tt.q, got, tt.want, tt.wantLo, tt.wantHi)
		}
	}
	inf := histogram{bounds: []float64{.01, math.Inf(1)}, counts: []float64{1, 10}}
	if got := inf.quantile(.5); got.value != .01 || !math.IsInf(got.hi, 1) {
		t.Errorf("quantile in the +Inf bucket = %+v; want 0.01 with hi +Inf", got)
	}
	if got, err := h.fractionWithin(.05); err != nil || got != .99 {
		t.Errorf("fractionWithin(0.05) = %g, %v; want 0.99", got, err)
	}
	earlier := histogram{bounds: h.bounds, counts: []float64{10, 10, 10, 10, 10}}
	d, err := h.since(earlier)
	if err != nil || d.total() != 90 || d.counts[0] != 40 {
		t.Errorf("since = %+v, %v; want total 90, first bucket 40", d, err)
	}
}
