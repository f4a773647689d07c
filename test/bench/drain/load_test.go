//go:build bench

package drain

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// shape is a backlog: txns transactions of perTxn rows each.
type shape struct {
	name   string // for the table
	slug   string // for the subtest
	txns   int
	perTxn int
}

// shapes are the three, at scale 1.
var shapes = []shape{
	{"200k tx x 1 row", "200kx1", 200_000, 1},
	{"2k tx x 100 rows", "2kx100", 2_000, 100},
	{"1 tx x 1M rows", "1x1M", 1, 1_000_000},
}

// payloadSizes are the approximate JSON payload sizes in bytes.
var payloadSizes = []int{200, 1 << 10, 16 << 10}

// maxWALBytes caps the WAL one shape may write (the slots hold all of
// it until every run is done): only the 16 KB payloads reach it at scale 1.
const maxWALBytes = 3 << 30

// aggregates is how many aggregate ids the rows spread over.
const aggregates = 1000

// scaled is s at the given scale, capped so that its WAL stays under
// maxWALBytes: per-transaction sizes shrink for the huge transaction, the
// transaction count for the others. capped reports a cut by the cap.
func (s shape) scaled(scale float64, payload int) (out shape, capped bool) {
	out = s
	if s.txns == 1 {
		out.perTxn = max(1, int(math.Round(float64(s.perTxn)*scale)))
	} else {
		out.txns = max(1, int(math.Round(float64(s.txns)*scale)))
	}
	// About what a row costs in WAL: the payload (TOASTed in 2 KB chunks
	// when large, each with its own tuple and index entry) plus the row's
	// other columns and its primary-key entry.
	perRow := payload + payload/16 + 400
	limit := maxWALBytes / perRow
	if out.rows() <= limit {
		return out, false
	}
	if out.txns == 1 {
		out.perTxn = limit
	} else {
		out.txns = max(1, limit/out.perTxn)
	}
	return out, true
}

func (s shape) rows() int { return s.txns * s.perTxn }

// rowMaker makes outbox rows whose payload is JSON around random base64 text,
// which pglz cannot compress, so TOAST stores (and the WAL carries) the full
// size.
type rowMaker struct {
	rng     *rand.Rand
	payload int
	buf     []byte
	n       int
}

func newRowMaker(seed uint64, payload int) *rowMaker {
	var s [32]byte
	for i := range 4 {
		for j := range 8 {
			s[i*8+j] = byte((seed + uint64(i)) >> (8 * j))
		}
	}
	return &rowMaker{rng: rand.New(rand.NewChaCha8(s)), payload: payload}
}

// row is the next row's message id, aggregate id, version and payload.
type row struct {
	id          [16]byte
	aggregateID string
	version     int64
	payload     string
}

func (m *rowMaker) next() row {
	m.n++
	var r row
	for i := 0; i < 16; i += 8 {
		v := m.rng.Uint64()
		for j := range 8 {
			r.id[i+j] = byte(v >> (8 * j))
		}
	}
	r.id[6] = r.id[6]&0x0f | 0x40 // version 4
	r.id[8] = r.id[8]&0x3f | 0x80
	r.aggregateID = fmt.Sprintf("agg-%d", m.n%aggregates)
	r.version = int64(m.n)
	head := fmt.Sprintf(`{"n":%d,"text":"`, m.n)
	textLen := max(16, m.payload-len(head)-2)
	raw := textLen * 3 / 4
	if cap(m.buf) < raw {
		m.buf = make([]byte, raw)
	}
	m.buf = m.buf[:raw]
	for i := range m.buf {
		m.buf[i] = byte(m.rng.Uint32())
	}
	r.payload = head + base64.RawStdEncoding.EncodeToString(m.buf) + `"}`
	return r
}

func uuidString(b [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var copyColumns = []string{"message_id", "aggregate_type", "aggregate_id", "aggregate_version", "type", "payload"}

// load writes s into table and returns the payload bytes written.
func load(ctx context.Context, t *testing.T, pgURL, table string, s shape, payload int) int64 {
	t.Helper()
	m := newRowMaker(rand.Uint64(), payload)
	return loadWith(ctx, t, pgURL, fmt.Sprintf("load %d rows into %s", s.rows(), table), func(conn *pgx.Conn) (int64, error) {
		if s.perTxn == 1 {
			return loadSingles(ctx, conn, s.txns, m, insertRow(table))
		}
		return loadCopies(ctx, conn, table, s, m)
	})
}

// loadWith runs fill on a connection of its own and returns the payload
// bytes it wrote; what names the load in a failure. Commits need not wait
// for the disk (synchronous_commit off): the runs read the WAL, not its
// durability.
func loadWith(ctx context.Context, t *testing.T, pgURL, what string, fill func(*pgx.Conn) (int64, error)) int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("connect to load: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	bytes, err := fill(conn)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return bytes
}

// insertRow writes the INSERT of r into table, walrelay's own shape
// (`walrelay schema`). Every value is ours: hex, digits, base64 and JSON
// punctuation, never a quote.
func insertRow(table string) func(w *strings.Builder, i int, r row) {
	return func(w *strings.Builder, _ int, r row) {
		fmt.Fprintf(w, "INSERT INTO %s (%s) VALUES ('%s','bench','%s',%d,'bench.v1','%s')",
			table, strings.Join(copyColumns, ","), uuidString(r.id), r.aggregateID, r.version, r.payload)
	}
}

// loadSingles commits n one-row transactions, many per round trip: the
// simple query protocol runs a string of BEGIN; INSERT; COMMIT; as as many
// transactions. insert writes the i-th transaction's INSERT of r.
func loadSingles(ctx context.Context, conn *pgx.Conn, n int, m *rowMaker, insert func(w *strings.Builder, i int, r row)) (int64, error) {
	const perTrip = 200
	var bytes int64
	var sql strings.Builder
	for done := 0; done < n; {
		sql.Reset()
		for i := 0; i < perTrip && done < n; i, done = i+1, done+1 {
			r := m.next()
			bytes += int64(len(r.payload))
			sql.WriteString("BEGIN;")
			insert(&sql, done, r)
			sql.WriteString(";COMMIT;")
		}
		if _, err := conn.Exec(ctx, sql.String()); err != nil {
			return bytes, err
		}
	}
	return bytes, nil
}

// loadCopies commits s.txns transactions of one COPY of s.perTxn rows each.
func loadCopies(ctx context.Context, conn *pgx.Conn, table string, s shape, m *rowMaker) (int64, error) {
	var bytes int64
	for range s.txns {
		src := &rowSource{m: m, left: s.perTxn}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, copyColumns, src)
			return err
		})
		bytes += src.bytes
		if err != nil {
			return bytes, err
		}
	}
	return bytes, nil
}

// rowSource feeds COPY one row at a time, so a million-row transaction
// never sits in the test's memory.
type rowSource struct {
	m     *rowMaker
	left  int
	cur   []any
	bytes int64
}

func (s *rowSource) Next() bool {
	if s.left == 0 {
		return false
	}
	s.left--
	r := s.m.next()
	s.bytes += int64(len(r.payload))
	s.cur = []any{r.id, "bench", r.aggregateID, r.version, "bench.v1", r.payload}
	return true
}

func (s *rowSource) Values() ([]any, error) { return s.cur, nil }
func (s *rowSource) Err() error             { return nil }
