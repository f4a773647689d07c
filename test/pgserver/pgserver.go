// Package pgserver starts private PostgreSQL servers for tests that need a
// server of their own: one with other settings than the rig's, or a primary
// with a physical standby to fail over to. It uses the rig's server
// binaries (WALRELAY_TEST_PG_BIN, exported by scripts/pg.sh env for the
// PG_MAJOR the rig runs) and Debian's client tools, on loopback ports of
// its own, in a temporary folder removed when the test ends.
//
// As root the servers run as the postgres system user (PostgreSQL refuses
// root), as scripts/pg.sh runs the rig's.
package pgserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// debianBin holds the client tools and, for PostgreSQL 15, the server.
const debianBin = "/usr/lib/postgresql/15/bin"

// Bin is the folder of the server binaries the rig runs: initdb, pg_ctl
// and postgres of its PG_MAJOR.
func Bin() string {
	if b := os.Getenv("WALRELAY_TEST_PG_BIN"); b != "" {
		return b
	}
	return debianBin
}

// Major is the major version of Bin's server (14 to 18), from
// WALRELAY_TEST_PG_MAJOR; 15 when unset.
func Major() int {
	if n, err := strconv.Atoi(os.Getenv("WALRELAY_TEST_PG_MAJOR")); err == nil {
		return n
	}
	return 15
}

// Server is one private PostgreSQL server.
type Server struct {
	t    *testing.T
	Dir  string // the test's folder; Data is below it
	Data string
	Port int
	Log  string

	settings Settings // the settings Start was given, which a standby inherits
}

// Settings are postgresql.conf lines, "name = value".
type Settings []string

// Start initialises a cluster and starts it with the rig's settings
// (wal_level=logical, fsync off, loopback trust for every role, including
// replication) plus extra. The superuser is walrelay, with REPLICATION;
// the database walrelay exists.
func Start(t *testing.T, extra Settings) *Server {
	t.Helper()
	s := newServer(t)
	s.run("initdb", "-D", s.Data, "-U", "walrelay", "-A", "trust", "-E", "UTF8", "--locale=C", "-N")
	s.writeHBA()
	s.settings = append(Settings{"wal_level = logical", "max_replication_slots = 20", "max_wal_senders = 20"}, extra...)
	s.configure(s.settings)
	s.start()
	s.Exec(t, "CREATE DATABASE walrelay")
	return s
}

func newServer(t *testing.T) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "walrelay-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	chownToOwner(t, dir)
	s := &Server{t: t, Dir: dir, Data: filepath.Join(dir, "data"), Port: freePort(t), Log: filepath.Join(dir, "log")}
	t.Cleanup(func() { s.pgctl("-m", "immediate", "stop") }) //nolint:errcheck // best effort; it may be down already
	return s
}

// URL is a connection URL of db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://walrelay@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Host is the server's host:port, for a multi-host URL.
func (s *Server) Host() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Exec runs SQL in the database walrelay (postgres before it exists).
func (s *Server) Exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := "walrelay"
	if strings.HasPrefix(sql, "CREATE DATABASE") {
		db = "postgres"
	}
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		t.Fatalf("connect to %s: %v", s.Host(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s on %s: %v", sql, s.Host(), err)
	}
}

// Row is one row of a query, read when it is scanned.
type Row struct {
	s    *Server
	sql  string
	args []any
}

// QueryRow runs sql on the server's database walrelay when the row is
// scanned, on a connection of its own.
func (s *Server) QueryRow(sql string, args ...any) Row {
	return Row{s: s, sql: sql, args: args}
}

// Scan reads the row into dest; pgx.ErrNoRows when there is none.
func (r Row) Scan(dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.s.URL("walrelay"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, r.sql, r.args...).Scan(dest...)
}

// Standby makes a physical standby of s: s stops (fast) while its data
// folder is copied, and starts again; the copy follows s through the
// physical slot slotName with hot_standby_feedback, and, on PostgreSQL 17
// and later, synchronises s's failover slots (sync_replication_slots).
func (s *Server) Standby(t *testing.T, slotName string, extra Settings) *Server {
	t.Helper()
	s.Exec(t, "SELECT pg_create_physical_replication_slot($1, true)", slotName)
	s.Stop(t)
	sb := newServer(t)
	copyDir(t, s.Data, sb.Data)
	os.Remove(filepath.Join(sb.Data, "postmaster.pid"))
	// The primary's slots are its own: a copy on the standby would hold
	// WAL back there and, for a logical slot, block the synced copy of the
	// same name.
	slots, _ := filepath.Glob(filepath.Join(sb.Data, "pg_replslot", "*"))
	for _, dir := range slots {
		os.RemoveAll(dir)
	}
	s.start()
	settings := Settings{
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=walrelay dbname=walrelay application_name=%s'", s.Port, slotName),
		fmt.Sprintf("primary_slot_name = '%s'", slotName),
		"hot_standby_feedback = on",
	}
	if Major() >= 17 {
		settings = append(settings, "sync_replication_slots = on")
	}
	sb.settings = append(append(append(Settings{}, s.settings...), settings...), extra...)
	sb.configure(sb.settings)
	if err := os.WriteFile(filepath.Join(sb.Data, "standby.signal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	chownToOwner(t, filepath.Join(sb.Data, "standby.signal"))
	sb.start()
	return sb
}

// Stop stops the server (fast shutdown: a planned switchover's first step).
func (s *Server) Stop(t *testing.T) {
	t.Helper()
	if out, err := s.pgctl("-m", "fast", "-w", "stop"); err != nil {
		t.Fatalf("pg_ctl stop on %s: %v\n%s", s.Host(), err, out)
	}
}

// Kill ends the postmaster and its backends with SIGKILL at once, as a
// crashed machine would: no shutdown checkpoint, no goodbye to clients.
func (s *Server) Kill(t *testing.T) {
	t.Helper()
	pid := s.pid(t)
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(pid)).Output() // none is fine
	pids := append([]string{strconv.Itoa(pid)}, strings.Fields(string(out))...)
	for _, p := range pids {
		n, _ := strconv.Atoi(p)
		syscall.Kill(n, syscall.SIGKILL) //nolint:errcheck // one that ended meanwhile is fine
	}
}

// Promote ends recovery on a standby and waits until it accepts writes.
func (s *Server) Promote(t *testing.T) {
	t.Helper()
	if out, err := s.pgctl("-w", "promote"); err != nil {
		t.Fatalf("pg_ctl promote on %s: %v\n%s", s.Host(), err, out)
	}
}

// Timeline is a primary's current timeline.
func (s *Server) Timeline(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("walrelay"))
	if err != nil {
		t.Fatalf("connect to %s: %v", s.Host(), err)
	}
	defer conn.Close(ctx)
	// The WAL file name starts with the timeline, in hex; the checkpoint's
	// timeline lags a promotion until the next checkpoint.
	var name string
	if err := conn.QueryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())").Scan(&name); err != nil {
		t.Fatalf("timeline of %s: %v", s.Host(), err)
	}
	tli, err := strconv.ParseInt(name[:8], 16, 32)
	if err != nil {
		t.Fatalf("timeline of %s from %q: %v", s.Host(), name, err)
	}
	return int(tli)
}

func (s *Server) pid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Data, "postmaster.pid"))
	if err != nil {
		t.Fatalf("postmaster.pid of %s: %v", s.Host(), err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid of %s: %v", s.Host(), err)
	}
	return pid
}

func (s *Server) start() {
	s.t.Helper()
	if out, err := s.pgctl("-l", s.Log, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(s.Log)
		s.t.Fatalf("pg_ctl start on port %d: %v\n%s\n%s", s.Port, err, out, log)
	}
}

func (s *Server) pgctl(args ...string) ([]byte, error) {
	return asOwner("pg_ctl", append([]string{"-D", s.Data}, args...)...).CombinedOutput()
}

func (s *Server) run(name string, args ...string) {
	s.t.Helper()
	if out, err := asOwner(name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// configure writes the server's own settings file, included from
// postgresql.conf; a standby's copy is rewritten with its own.
func (s *Server) configure(extra Settings) {
	s.t.Helper()
	lines := append(Settings{
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("port = %d", s.Port),
		fmt.Sprintf("unix_socket_directories = '%s'", s.Dir),
		"fsync = off",
		"full_page_writes = off",
		"wal_sender_timeout = 60s",
	}, extra...)
	s.writeFile("walrelay-test.conf", strings.Join(lines, "\n")+"\n")
	conf, err := os.ReadFile(filepath.Join(s.Data, "postgresql.conf"))
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.Contains(string(conf), "walrelay-test.conf") {
		s.writeFile("postgresql.conf", string(conf)+"\ninclude_if_exists = 'walrelay-test.conf'\n")
	}
}

func (s *Server) writeHBA() {
	s.writeFile("pg_hba.conf", "local all all trust\nhost all all 127.0.0.1/32 trust\n"+
		"local replication all trust\nhost replication all 127.0.0.1/32 trust\n")
}

func (s *Server) writeFile(name, text string) {
	s.t.Helper()
	p := filepath.Join(s.Data, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		s.t.Fatal(err)
	}
	chownToOwner(s.t, p)
}

// copyDir copies a stopped cluster's data folder, owner and modes kept.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", from, err, out)
	}
}

// owner is the system user the servers run as: the postgres user under
// root, else the user running the test.
func owner() (*user.User, bool) {
	if os.Geteuid() != 0 {
		return nil, false
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, false
	}
	return u, true
}

func chownToOwner(t *testing.T, path string) {
	t.Helper()
	u, ok := owner()
	if !ok {
		return
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// asOwner runs a server binary as the servers' owner.
func asOwner(name string, args ...string) *exec.Cmd {
	path := filepath.Join(Bin(), name)
	if _, ok := owner(); ok {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
