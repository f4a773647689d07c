package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// Record is one Kafka record as kcat saw it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       *string
	Payload   *string
	Headers   map[string]string
	// Time is the record's timestamp; zero when it has none.
	Time time.Time
}

// Read reads a whole topic with kcat, from the beginning to the end it has
// when kcat starts.
func Read(t testing.TB, brokers, topic string) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-b", brokers, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat read %s: got %v; want the records\n%s", topic, err, stderr.String())
	}
	recs, err := parseKcat(out)
	if err != nil {
		t.Fatalf("parse kcat output of %s: got %v; want records", topic, err)
	}
	return recs
}

// parseKcat reads kcat -J output: one JSON object per record, headers as a
// flat [key, value, key, value, ...] array.
func parseKcat(out []byte) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var raw struct {
			Topic     string    `json:"topic"`
			Partition int32     `json:"partition"`
			Offset    int64     `json:"offset"`
			Key       *string   `json:"key"`
			Payload   *string   `json:"payload"`
			Headers   []*string `json:"headers"`
			TS        int64     `json:"ts"`
		}
		if err := json.Unmarshal(line, &raw); err != nil {
			return nil, fmt.Errorf("%w in %q", err, line)
		}
		r := Record{Topic: raw.Topic, Partition: raw.Partition, Offset: raw.Offset, Key: raw.Key, Payload: raw.Payload, Headers: map[string]string{}}
		if raw.TS > 0 {
			r.Time = time.UnixMilli(raw.TS)
		}
		for i := 0; i+1 < len(raw.Headers); i += 2 {
			if raw.Headers[i] == nil {
				continue
			}
			v := ""
			if raw.Headers[i+1] != nil {
				v = *raw.Headers[i+1]
			}
			if _, dup := r.Headers[*raw.Headers[i]]; dup {
				return nil, fmt.Errorf("header %q twice at %s/%d@%d", *raw.Headers[i], r.Topic, r.Partition, r.Offset)
			}
			r.Headers[*raw.Headers[i]] = v
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}
