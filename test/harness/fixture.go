package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// Fixture is one test's private outbox: its own table, publication, slot
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
	PG          *pgtest.DB // the fixture's objects on the server, DB's pool
	rounds      int        // write calls so far
	unset       []string   // variables of Env that commands do not get (Unsetenv)
}

// partitions is the partition count of every test topic: more than one, so
// that per-key partitioning and per-partition order are really exercised.
const partitions = 3

// Partitions is the partition count of every test topic, for the tests
// that check what a record says of its routing.
const Partitions = partitions

func New(t *testing.T, aggregateTypes ...string) *Fixture {
	t.Helper()
	_, brokers := testkit.Services(t)
	return NewOn(t, brokers, aggregateTypes...)
}

// NewOn is New on other Kafka brokers than the rig's (a test's own broker,
// say): the fixture's topics, its walrelay commands (--kafka-brokers) and
// its verifier use brokers, which must take plain connections.
func NewOn(t *testing.T, brokers string, aggregateTypes ...string) *Fixture {
	t.Helper()
	pgURL, _ := testkit.Services(t)
	return NewWith(t, pgURL, brokers, aggregateTypes...)
}

// NewWith is New on another PostgreSQL than the rig's (a test's own
// primary and standby, say): pgURL, a URL or a keyword/value string, is
// its superuser's.
func NewWith(t *testing.T, pgURL, brokers string, aggregateTypes ...string) *Fixture {
	t.Helper()
	f := newFixture(t, pgURL, brokers)
	f.CreateTopics(f.topicsOf(aggregateTypes)...)
	return f
}

// NewPartitioned is New with topics of n partitions instead of
// Partitions (a benchmark in the shape of a production topic, say).
func NewPartitioned(t *testing.T, n int, aggregateTypes ...string) *Fixture {
	t.Helper()
	pgURL, brokers := testkit.Services(t)
	f := newFixture(t, pgURL, brokers)
	kafkatest.CreateTopics(t, brokers, n, f.topicsOf(aggregateTypes)...)
	return f
}

// newFixture is NewWith but for the topics: the caller creates them
// (topicsOf), on the single broker (NewWith) or the cluster (NewOnCluster).
func newFixture(t *testing.T, pgURL, brokers string) *Fixture {
	t.Helper()
	pg := pgtest.Connect(t, pgURL, "")
	id := pg.Name
	f := &Fixture{
		t: t, PGURL: pgURL, Brokers: brokers, ID: id, DB: pg.Pool, PG: pg,
		Table: "outbox_" + id, Publication: "pub_" + id, Slot: "slot_" + id, TopicPrefix: "e2e_" + id,
	}
	pg.DropSlot(f.Slot)
	pg.DropPublication(f.Publication)
	pg.DropTable(f.Table, f.Table+"_dead_letters", f.Table+"_recoveries", f.Table+"_topics")
	// The topics walrelay made on its own go too.
	t.Cleanup(func() {
		if err := kafkatest.DeleteTopicsWithPrefix(f.Brokers, f.TopicPrefix+"."); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	ctx := context.Background()
	f.RelayURL = f.ensureRelayRole(ctx, pgURL)
	// The table, publication and grants come from `walrelay schema`, as
	// users get them, applied by the tables' owner.
	ddl := f.WalrelayOK("schema", "--grant-to", RelayRole)
	if err := ExecGrants(ctx, f.DB, ddl); err != nil {
		t.Fatalf("apply `walrelay schema` DDL: %v", err)
	}
	return f
}

// topicsOf is the fixture's topics: one per aggregate type, and the topic
// the writers name explicitly in some rows.
func (f *Fixture) topicsOf(aggregateTypes []string) []string {
	topics := []string{f.TopicPrefix + ".special"}
	for _, at := range aggregateTypes {
		topics = append(topics, f.Topic(at))
	}
	return topics
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
// fixture's settings (Env) and then env on top, less the variables
// Unsetenv named.
func (f *Fixture) Command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, Binary, args...)
	cmd.Env = slices.DeleteFunc(append(append(os.Environ(), f.Env()...), env...), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(f.unset, name)
	})
	return cmd
}

// Unsetenv keeps the variables named (WALRELAY_TOPIC_TEMPLATE, say) from
// every later command of the fixture: a flag a variable sets counts as
// given, and a test of the defaults (a --preset's) needs it not given.
func (f *Fixture) Unsetenv(names ...string) { f.unset = append(f.unset, names...) }

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

// CurrentLSN is the server's WAL write position.
func (f *Fixture) CurrentLSN() pglogrepl.LSN {
	f.t.Helper()
	return f.PG.CurrentLSN()
}

// ConfirmedLSN is the confirmed_flush_lsn of the fixture's slot (0: none
// yet).
func (f *Fixture) ConfirmedLSN() pglogrepl.LSN {
	f.t.Helper()
	return f.PG.ConfirmedLSN(f.Slot)
}

// WaitConfirmed waits until the slot's confirmed_flush_lsn reaches target,
// failing at once when r (if not nil) exits, and returns how long it took.
func (f *Fixture) WaitConfirmed(r *Relay, target pglogrepl.LSN, within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	poll.EventuallyEvery(f.t, within, 100*time.Millisecond, ">= "+target.String(), func() (string, bool) {
		got := f.ConfirmedLSN()
		if got < target && r != nil {
			r.Running()
		}
		return "slot confirmed_flush_lsn " + got.String(), got >= target
	})
	return time.Since(start)
}

// ReadTopic reads a whole topic of the fixture's brokers with kcat, and
// fails the test for each record that is no valid CloudEvent
// (CheckCloudEvents): every test that reads what walrelay published checks
// that.
func (f *Fixture) ReadTopic(topic string) []kafkatest.Record {
	f.t.Helper()
	recs := kafkatest.Read(f.t, f.Brokers, topic)
	CheckCloudEvents(f.t, recs)
	return recs
}
