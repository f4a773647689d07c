package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
)

// fixture is one test's private outbox: its own table, publication, slot
// and topics, all removed in t.Cleanup.
type fixture struct {
	t           *testing.T
	pgURL       string
	brokers     string
	db          *pgxpool.Pool
	id          string
	table       string
	publication string
	slot        string
	topicPrefix string
	rounds      int // write calls so far
}

// partitions is the partition count of every test topic: more than one, so
// that per-key partitioning and per-partition order are really exercised.
const partitions = 3

func newFixture(t *testing.T, aggregateTypes ...string) *fixture {
	t.Helper()
	pgURL, brokers := services(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b[:])
	f := &fixture{
		t: t, pgURL: pgURL, brokers: brokers, id: id,
		table: "outbox_" + id, publication: "pub_" + id, slot: "slot_" + id, topicPrefix: "e2e_" + id,
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	f.db = db
	t.Cleanup(f.cleanup)

	// The table and publication come from `walrelay schema`, as users get them.
	ddl := f.walrelayOK("schema")
	if _, err := db.Exec(ctx, ddl); err != nil {
		t.Fatalf("apply `walrelay schema` DDL: %v", err)
	}
	topics := []string{f.topicPrefix + ".special"}
	for _, at := range aggregateTypes {
		topics = append(topics, f.topic(at))
	}
	f.createTopics(topics...)
	return f
}

func (f *fixture) topic(aggregateType string) string { return f.topicPrefix + "." + aggregateType }

// args are the flags every walrelay command of this fixture gets.
func (f *fixture) args(verb string, extra ...string) []string {
	a := []string{verb,
		"--postgres-url", f.pgURL,
		"--kafka-brokers", f.brokers,
		"--table", "public." + f.table,
		"--publication", f.publication,
		"--slot", f.slot,
		"--topic-template", f.topicPrefix + ".{aggregate_type}",
		"--metrics-addr", "",
		"--status-interval", "1s",
	}
	return append(a, extra...)
}

// walrelay runs a command to completion and returns stdout, stderr and its
// exit code.
func (f *fixture) walrelay(verb string, extra ...string) (string, string, int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, f.args(verb, extra...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("run walrelay %s: %v", verb, err)
	}
	return stdout.String(), stderr.String(), code
}

func (f *fixture) walrelayOK(verb string, extra ...string) string {
	f.t.Helper()
	stdout, stderr, code := f.walrelay(verb, extra...)
	if code != 0 {
		f.t.Fatalf("walrelay %s: exit code %d; want 0\nstderr:\n%s", verb, code, stderr)
	}
	return stdout
}

// relay is a running `walrelay run`.
type relay struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// start runs `walrelay init` then `walrelay run` in the background.
func (f *fixture) start(extra ...string) *relay {
	f.t.Helper()
	f.walrelayOK("init")
	return f.run(extra...)
}

func (f *fixture) run(extra ...string) *relay {
	f.t.Helper()
	r := &relay{t: f.t, stderr: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(binary, f.args("run", extra...)...)
	r.cmd.Stdout, r.cmd.Stderr = r.stderr, r.stderr
	if err := r.cmd.Start(); err != nil {
		f.t.Fatalf("start walrelay run: %v", err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	f.t.Cleanup(func() {
		r.cmd.Process.Kill() //nolint:errcheck // may have exited already
		<-r.done
		if f.t.Failed() {
			f.t.Logf("walrelay run output:\n%s", r.stderr.String())
		}
	})
	return r
}

// stop waits until the relay streams, sends SIGTERM and returns the exit
// code.
func (r *relay) stop() int {
	r.t.Helper()
	r.waitStarted()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatalf("signal walrelay: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		r.t.Fatalf("walrelay did not stop within 90s of SIGTERM\n%s", r.stderr.String())
	}
	return r.cmd.ProcessState.ExitCode()
}

// waitStarted waits until the relay has started replication.
func (r *relay) waitStarted() {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(r.stderr.String(), `"replication started"`) {
		r.running()
		if time.Now().After(deadline) {
			r.t.Fatalf("walrelay did not start replication within 60s:\n%s", r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running fails the test if the relay has exited.
func (r *relay) running() {
	r.t.Helper()
	select {
	case <-r.done:
		r.t.Fatalf("walrelay exited early (%v):\n%s", r.err, r.stderr.String())
	default:
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (f *fixture) createTopics(topics ...string) {
	f.t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(f.brokers, ",")...), Timeout: 30 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, topic := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1})
	}
	resp, err := client.CreateTopics(context.Background(), req)
	if err != nil {
		f.t.Fatalf("create topics: %v", err)
	}
	for topic, err := range resp.Errors {
		if err != nil {
			f.t.Fatalf("create topic %s: %v", topic, err)
		}
	}
}

func (f *fixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The slot may still be held for a moment by a relay that just exited.
	for i := 0; i < 50; i++ {
		_, err := f.db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", f.slot)
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+f.publication) //nolint:errcheck // best effort
	f.db.Exec(ctx, "DROP TABLE IF EXISTS "+f.table)             //nolint:errcheck // best effort
	f.db.Close()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(f.brokers, ",")...), Timeout: 30 * time.Second}
	var topics []string
	if md, err := client.Metadata(ctx, &kafka.MetadataRequest{}); err == nil {
		for _, tp := range md.Topics {
			if strings.HasPrefix(tp.Name, f.topicPrefix+".") {
				topics = append(topics, tp.Name)
			}
		}
	}
	if len(topics) > 0 {
		client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics}) //nolint:errcheck // best effort
	}
}

func (f *fixture) currentLSN() pglogrepl.LSN {
	f.t.Helper()
	var s string
	if err := f.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		f.t.Fatalf("read current wal lsn: %v", err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		f.t.Fatal(err)
	}
	return lsn
}

func (f *fixture) confirmedLSN() pglogrepl.LSN {
	f.t.Helper()
	var s *string
	err := f.db.QueryRow(context.Background(),
		"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&s)
	if err != nil {
		f.t.Fatalf("read slot %s: %v", f.slot, err)
	}
	if s == nil {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		f.t.Fatal(err)
	}
	return lsn
}

// waitConfirmed waits until the slot's confirmed_flush_lsn reaches target.
func (f *fixture) waitConfirmed(r *relay, target pglogrepl.LSN, within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		got := f.confirmedLSN()
		if got >= target {
			return time.Since(start)
		}
		if time.Since(start) > within {
			f.t.Fatalf("slot confirmed_flush_lsn = %s after %s; want >= %s", got, within, target)
		}
		if r != nil {
			r.running()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// record is one Kafka record as kcat saw it.
type record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       *string
	Payload   *string
	Headers   map[string]string
}

// readTopic reads a whole topic with kcat, an independent client.
func (f *fixture) readTopic(topic string) []record {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-b", f.brokers, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("kcat read %s: %v\n%s", topic, err, stderr.String())
	}
	recs, err := parseKcat(out)
	if err != nil {
		f.t.Fatalf("parse kcat output of %s: %v", topic, err)
	}
	return recs
}

// freePort returns a loopback address nobody listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
