package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
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
type Fixture struct {
	t *testing.T
	// PGURL is the rig's superuser, in the role of the application that
	// owns the outbox table; DB is connected with it.
	PGURL string
	// RelayURL is RelayRole's: every walrelay command of the fixture
	// connects with it (Args).
	RelayURL    string
	Brokers     string
	DB          *pgxpool.Pool
	ID          string // unique suffix of every name below
	Table       string
	Publication string
	Slot        string
	TopicPrefix string
	rounds      int // write calls so far
}

// partitions is the partition count of every test topic: more than one, so
// that per-key partitioning and per-partition order are really exercised.
const partitions = 3

func New(t *testing.T, aggregateTypes ...string) *Fixture {
	t.Helper()
	_, brokers := Services(t)
	return NewOn(t, brokers, aggregateTypes...)
}

// NewOn is New on other Kafka brokers than the rig's (a test's own broker,
// say): the fixture's topics, its walrelay commands (--kafka-brokers) and
// its verifier use brokers, which must take plain connections.
func NewOn(t *testing.T, brokers string, aggregateTypes ...string) *Fixture {
	t.Helper()
	pgURL, _ := Services(t)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b[:])
	f := &Fixture{
		t: t, PGURL: pgURL, Brokers: brokers, ID: id,
		Table: "outbox_" + id, Publication: "pub_" + id, Slot: "slot_" + id, TopicPrefix: "e2e_" + id,
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	f.DB = db
	t.Cleanup(f.cleanup)

	f.RelayURL = f.ensureRelayRole(ctx, pgURL)
	// The table, publication and grants come from `walrelay schema`, as
	// users get them, applied by the tables' owner.
	ddl := f.WalrelayOK("schema", "--grant-to", RelayRole)
	if _, err := db.Exec(ctx, ddl); err != nil {
		t.Fatalf("apply `walrelay schema` DDL: %v", err)
	}
	topics := []string{f.TopicPrefix + ".special"}
	for _, at := range aggregateTypes {
		topics = append(topics, f.Topic(at))
	}
	f.CreateTopics(topics...)
	return f
}

func (f *Fixture) Topic(aggregateType string) string { return f.TopicPrefix + "." + aggregateType }

// Env is the fixture's settings as the WALRELAY_* variables of the
// flags: each verb reads the variables of the flags it has and ignores
// the others, as it does for users. Flags given to a command win.
func (f *Fixture) Env() []string {
	return []string{
		"WALRELAY_POSTGRES_URL=" + f.RelayURL,
		"WALRELAY_KAFKA_BROKERS=" + f.Brokers,
		"WALRELAY_TABLE=public." + f.Table,
		"WALRELAY_PUBLICATION=" + f.Publication,
		"WALRELAY_SLOT=" + f.Slot,
		"WALRELAY_TOPIC_TEMPLATE=" + f.TopicPrefix + ".{aggregate_type}",
		"WALRELAY_METRICS_ADDR=",
		"WALRELAY_STATUS_INTERVAL=1s",
	}
}

// Command is walrelay with args, in the test's environment with the
// fixture's settings (Env) and then env on top.
func (f *Fixture) Command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Binary, args...)
	cmd.Env = append(append(os.Environ(), f.Env()...), env...)
	return cmd
}

// walrelay runs a command to completion and returns stdout, stderr and its
// exit code.
func (f *Fixture) Walrelay(verb string, extra ...string) (string, string, int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := f.Command(ctx, nil, append([]string{verb}, extra...)...)
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

func (f *Fixture) WalrelayOK(verb string, extra ...string) string {
	f.t.Helper()
	stdout, stderr, code := f.Walrelay(verb, extra...)
	if code != 0 {
		f.t.Fatalf("walrelay %s: exit code %d; want 0\nstderr:\n%s", verb, code, stderr)
	}
	return stdout
}

// relay is a running `walrelay run`.
type Relay struct {
	t      *testing.T
	Cmd    *exec.Cmd
	Stderr *syncBuffer // everything it printed
	done   chan struct{}
	err    error
}

// start runs `walrelay init` then `walrelay run` in the background.
func (f *Fixture) Start(extra ...string) *Relay {
	f.t.Helper()
	f.WalrelayOK("init")
	return f.Run(extra...)
}

func (f *Fixture) Run(extra ...string) *Relay {
	f.t.Helper()
	return f.RunEnv(nil, extra...)
}

// RunEnv runs `walrelay run` with extra environment variables (say
// WALRELAY_FAILPOINT=after-ack) on top of the test's own.
func (f *Fixture) RunEnv(env []string, extra ...string) *Relay {
	f.t.Helper()
	r := &Relay{t: f.t, Stderr: &syncBuffer{}, done: make(chan struct{})}
	r.Cmd = f.Command(context.Background(), env, append([]string{"run"}, extra...)...)
	r.Cmd.Stdout, r.Cmd.Stderr = r.Stderr, r.Stderr
	if err := r.Cmd.Start(); err != nil {
		f.t.Fatalf("start walrelay run: %v", err)
	}
	go func() {
		r.err = r.Cmd.Wait()
		close(r.done)
	}()
	f.t.Cleanup(func() {
		r.Cmd.Process.Kill() //nolint:errcheck // may have exited already
		<-r.done
		if f.t.Failed() {
			f.t.Logf("walrelay run output:\n%s", r.Stderr.String())
		}
	})
	return r
}

// stop waits until the relay streams, sends SIGTERM and returns the exit
// code.
func (r *Relay) Stop() int {
	r.t.Helper()
	r.WaitStarted()
	if err := r.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatalf("signal walrelay: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		r.t.Fatalf("walrelay did not stop within 90s of SIGTERM\n%s", r.Stderr.String())
	}
	return r.Cmd.ProcessState.ExitCode()
}

// waitStarted waits until the relay has started replication.
func (r *Relay) WaitStarted() {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(r.Stderr.String(), `"replication started"`) {
		r.Running()
		if time.Now().After(deadline) {
			r.t.Fatalf("walrelay did not start replication within 60s:\n%s", r.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running fails the test if the relay has exited.
func (r *Relay) Running() {
	r.t.Helper()
	select {
	case <-r.done:
		r.t.Fatalf("walrelay exited early (%v):\n%s", r.err, r.Stderr.String())
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

func (f *Fixture) CreateTopics(topics ...string) {
	f.t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(f.Brokers, ",")...), Timeout: 30 * time.Second}
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

func (f *Fixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The slot may still be held for a moment by a relay that just exited.
	for i := 0; i < 50; i++ {
		_, err := f.DB.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", f.Slot)
		if err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.DB.Exec(ctx, "DROP PUBLICATION IF EXISTS "+f.Publication)                  //nolint:errcheck // best effort
	f.DB.Exec(ctx, "DROP TABLE IF EXISTS "+f.Table+", "+f.Table+"_dead_letters") //nolint:errcheck // best effort
	f.DB.Close()
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(f.Brokers, ",")...), Timeout: 30 * time.Second}
	var topics []string
	if md, err := client.Metadata(ctx, &kafka.MetadataRequest{}); err == nil {
		for _, tp := range md.Topics {
			if strings.HasPrefix(tp.Name, f.TopicPrefix+".") {
				topics = append(topics, tp.Name)
			}
		}
	}
	if len(topics) > 0 {
		client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics}) //nolint:errcheck // best effort
	}
}

func (f *Fixture) CurrentLSN() pglogrepl.LSN {
	f.t.Helper()
	var s string
	if err := f.DB.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		f.t.Fatalf("read current wal lsn: %v", err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		f.t.Fatal(err)
	}
	return lsn
}

func (f *Fixture) ConfirmedLSN() pglogrepl.LSN {
	f.t.Helper()
	var s *string
	err := f.DB.QueryRow(context.Background(),
		"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", f.Slot).Scan(&s)
	if err != nil {
		f.t.Fatalf("read slot %s: %v", f.Slot, err)
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
func (f *Fixture) WaitConfirmed(r *Relay, target pglogrepl.LSN, within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		got := f.ConfirmedLSN()
		if got >= target {
			return time.Since(start)
		}
		if time.Since(start) > within {
			f.t.Fatalf("slot confirmed_flush_lsn = %s after %s; want >= %s", got, within, target)
		}
		if r != nil {
			r.Running()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// record is one Kafka record as kcat saw it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       *string
	Payload   *string
	Headers   map[string]string
}

// readTopic reads a whole topic with kcat, an independent client.
func (f *Fixture) ReadTopic(topic string) []Record {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-b", f.Brokers, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J")
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
func FreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func Must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
