package harness

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ScrapeSums reads the relay's /metrics at addr once and returns, for every
// metric name, the sum of its series over their labels (the sum over topics
// of walrelay_published_messages_total, say). A histogram's series keep
// their suffixed names (_bucket, _sum, _count). A name the relay does not
// export is absent from the map.
func ScrapeSums(addr string) (map[string]float64, error) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %s", addr, resp.Status)
	}
	sums, err := parseSums(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	return sums, nil
}

// parseSums reads the Prometheus text format: one sample a line, "name
// value" or "name{labels} value", comments starting with #.
func parseSums(r io.Reader) (map[string]float64, error) {
	sums := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line+" ", "{ ")]
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			rest = rest[strings.LastIndex(rest, "}")+1:] // the value and timestamp hold no '}'
		}
		fields := strings.Fields(rest) // the value, then maybe a timestamp
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value in %q: %w", line, err)
		}
		sums[name] += v
	}
	return sums, sc.Err()
}

// Scrape returns one metric's value from the relay's /metrics at addr
// (the value of the first line that starts with name), or -1 when absent.
func Scrape(addr, name string) float64 {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}
