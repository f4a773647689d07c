package backfill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
)

// Config says what to read and where to publish it.
type Config struct {
	// Decoder names the outbox table and its columns, and says how a row
	// becomes a message (its content type, a NULL payload), as for the
	// stream. An empty Decoder.Table.Schema is public.
	Decoder decoder.Config
	// More are the further outbox tables of a slot of several, read in
	// the same transaction after Decoder's: their rows' Message.Table is
	// their index here plus one. Defaults to none.
	More []decoder.Config
	// Select picks the rows.
	Select Selection
	// Snapshot, when set, is an exported snapshot (slot.Snapshot.Name) the
	// read transaction imports: it then sees exactly what committed before
	// the slot's consistent point.
	Snapshot string
	// Position is the CommitLSN every message gets, Seq counting the rows
	// from 0 in the order read: the key a row parked in the dead-letter
	// table is kept under. Recovery passes the slot's consistent point
	// minus one (no WAL record starts at an odd LSN, so no streamed row
	// has it, and it sorts before all that the new slot streams).
	Position pglogrepl.LSN
	// Sink publishes the messages: its policy (Park or halt), Guard and
	// bounds apply as they do to the stream.
	Sink sink.Config
	// Rewrite, when set, changes each message before it is published or
	// counted (replay's topic and header).
	Rewrite func(*schema.Message)
	// CountBefore, when set, makes Result.Before count the rows that
	// occurred before it.
	CountBefore time.Time
	// Verb prefixes the progress lines ("recover", "replay").
	Verb string
	// Progress receives a line every ProgressInterval (default 2s) while
	// rows are published; nil prints none.
	Progress         io.Writer
	ProgressInterval time.Duration
	// FetchRows is the rows fetched from the cursor at a time. Defaults to
	// 1000.
	FetchRows int
}

// Result is what a run read and published.
type Result struct {
	// Selected is the rows the selection matched in the snapshot.
	Selected int64
	// Published counts the rows Kafka acknowledged; Parked those the sink
	// parked in the dead-letter table instead.
	Published, Parked int64
	// Before counts the rows that occurred before Config.CountBefore.
	Before int64
	// Order is the order the rows were read in, in words.
	Order string
	// ByTopic counts the messages per topic (Count only), with the rows
	// that cannot become messages under "".
	ByTopic map[string]int64
	Took    time.Duration
}

// Rate is rows per second.
func (r Result) Rate() float64 {
	if r.Took <= 0 {
		return 0
	}
	return float64(r.Published+r.Parked) / r.Took.Seconds()
}

func (c *Config) setDefaults() {
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 2 * time.Second
	}
	if c.FetchRows <= 0 {
		c.FetchRows = 1000
	}
	if c.Verb == "" {
		c.Verb = "backfill"
	}
}

// Run reads the selected rows in one repeatable-read transaction (with
// cfg.Snapshot when set) through a cursor, and publishes each as the
// stream would: the same checks and the same message, through a sink of
// its own with cfg.Sink's policy. It returns once every row is
// acknowledged or parked, or with the first error, when what was not
// acknowledged may not have been published. conn must be idle and is used
// alone until Run returns.
func Run(ctx context.Context, conn *pgx.Conn, cfg Config, log *zap.Logger) (Result, error) {
	cfg.setDefaults()
	start := time.Now()
	p, err := newPublisher(ctx, cfg, log)
	if err != nil {
		return Result{}, err
	}
	res, err := read(ctx, conn, &cfg, p.start, p.publish)
	if endErr := p.end(err != nil); err == nil {
		err = endErr
	}
	res.Published, res.Parked = p.acked.Load()-p.parked.Load(), p.parked.Load()
	res.Took = time.Since(start)
	if err == nil && res.Published+res.Parked != res.Selected {
		err = fmt.Errorf("%d of %d rows were not acknowledged", res.Selected-res.Published-res.Parked, res.Selected)
	}
	return res, err
}

// Count reads the selected rows as Run does and counts them per topic
// (Result.ByTopic), publishing nothing.
func Count(ctx context.Context, conn *pgx.Conn, cfg Config) (Result, error) {
	cfg.setDefaults()
	start := time.Now()
	byTopic := map[string]int64{}
	res, err := read(ctx, conn, &cfg, func(int64) {}, func(_ int64, m *schema.Message, _ *decoder.BadRowError) error {
		if m == nil {
			byTopic[""]++
			return nil
		}
		byTopic[cfg.Sink.Topic(m)]++
		return nil
	})
	res.ByTopic, res.Took = byTopic, time.Since(start)
	return res, err
}

// read runs the transaction: each table's columns, the count of them all
// (passed to started), then each table's rows in order to each, as a
// message or a bad row of that table (Message.Table, BadRowError.Table:
// its index, Decoder's being 0). Seq counts the rows of all tables, so
// that every row has a position of its own.
func read(ctx context.Context, conn *pgx.Conn, cfg *Config, started func(total int64),
	each func(n int64, m *schema.Message, bad *decoder.BadRowError) error) (Result, error) {
	tx, err := begin(ctx, conn, cfg.Snapshot)
	if err != nil {
		return Result{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	type part struct {
		t     *table
		q     query
		dec   *decoder.RowDecoder
		count int64
	}
	var parts []part
	var res Result
	for i, dc := range append([]decoder.Config{cfg.Decoder}, cfg.More...) {
		one := *cfg
		one.Decoder = dc
		t, err := readTable(ctx, tx, &one)
		if err != nil {
			return res, err
		}
		q, err := t.build(cfg.Select)
		if err != nil {
			return res, err
		}
		p := part{t: t, q: q}
		if err := tx.QueryRow(ctx, q.count, q.args...).Scan(&p.count); err != nil {
			return res, fmt.Errorf("count the selected outbox rows of %s: %w", t.name, err)
		}
		if p.dec, err = decoder.NewRowDecoder(dc, t.cols); err != nil {
			return res, err
		}
		if i == 0 {
			res.Order = q.order
		}
		res.Selected += p.count
		parts = append(parts, p)
	}
	started(res.Selected)
	var n int64
	for i, p := range parts {
		err = fetchAll(ctx, tx, p.q, cfg.FetchRows, func(vals [][]byte) error {
			m, bad, err := decodeRow(p.dec, p.t, cfg, vals, n)
			if err != nil {
				return err
			}
			switch {
			case m != nil:
				m.Table = i
			case bad != nil:
				bad.Table = i
			}
			if m != nil && !cfg.CountBefore.IsZero() && m.OccurredAt.Before(cfg.CountBefore) {
				res.Before++
			}
			n++
			return each(n-1, m, bad)
		})
		if err != nil {
			return res, err
		}
		if _, err := tx.Exec(ctx, "CLOSE "+cursorName); err != nil {
			return res, fmt.Errorf("close the outbox cursor: %w", err)
		}
	}
	if n != res.Selected {
		err = fmt.Errorf("read %d rows where the count said %d", n, res.Selected)
	}
	return res, err
}

// begin opens the read transaction: repeatable read, read only, with the
// exported snapshot when one is given, and the text forms the decoder
// reads (hex bytea, ISO timestamps) whatever the role's settings.
func begin(ctx context.Context, conn *pgx.Conn, snapshot string) (pgx.Tx, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin the read transaction: %w", err)
	}
	fail := func(what string, err error) (pgx.Tx, error) {
		tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the error below says more
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if snapshot != "" {
		if !validSnapshotName(snapshot) {
			return fail("import snapshot", fmt.Errorf("bad snapshot name %q", snapshot))
		}
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return fail("import snapshot "+snapshot, err)
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL bytea_output = 'hex'; SET LOCAL DateStyle = 'ISO, YMD'"); err != nil {
		return fail("set the text formats", err)
	}
	return tx, nil
}

// validSnapshotName accepts what pg_export_snapshot makes: hex digits and
// dashes.
func validSnapshotName(s string) bool {
	for _, c := range s {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'A' && c <= 'F' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// columnsSQL lists a table's columns as pgoutput sends them: in order,
// without dropped and generated ones.
const columnsSQL = `SELECT a.attname::text, a.atttypid::int8 FROM pg_attribute a
WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attnum`

// readTable reads the table's columns and whether commit timestamps are
// tracked.
func readTable(ctx context.Context, tx pgx.Tx, cfg *Config) (*table, error) {
	cols, name := cfg.Decoder.Columns, cfg.Decoder.Table
	if cols == (schema.Columns{}) {
		cols = schema.DefaultColumns()
	}
	if name.Schema == "" {
		name.Schema = "public"
	}
	t := &table{name: name, names: cols.Names(), aggType: cfg.Decoder.AggregateTypeDefault}
	rows, err := tx.Query(ctx, columnsSQL, name.Quoted())
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	for rows.Next() {
		var c decoder.Column
		var oid int64
		if err := rows.Scan(&c.Name, &oid); err != nil {
			return nil, fmt.Errorf("read the columns of %s: %w", name, err)
		}
		c.Type = uint32(oid)
		t.cols = append(t.cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", name, err)
	}
	if len(t.cols) == 0 {
		return nil, fmt.Errorf("%s: %w", name, errNoColumns)
	}
	// A table whose rows cannot be decoded is a mistake of configuration:
	// said once, not as a bad row per row.
	if err := decoder.CheckColumns(cfg.Decoder, t.cols); err != nil {
		return nil, err
	}
	err = tx.QueryRow(ctx, "SELECT current_setting('track_commit_timestamp')::bool").Scan(&t.commitTS)
	if err != nil {
		return nil, fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	return t, nil
}

// cursorName is the read's cursor, one per transaction.
const cursorName = "walrelay_backfill"

// fetchAll declares the cursor and fetches it batch by batch in text
// form, passing each row's values (nil for NULL; valid until fn returns).
func fetchAll(ctx context.Context, tx pgx.Tx, q query, batch int, fn func(vals [][]byte) error) error {
	if _, err := tx.Exec(ctx, "DECLARE "+cursorName+" NO SCROLL CURSOR FOR "+q.rows, q.args...); err != nil {
		return fmt.Errorf("open the outbox cursor: %w", err)
	}
	fetch := "FETCH FORWARD " + strconv.Itoa(batch) + " FROM " + cursorName
	pc := tx.Conn().PgConn()
	for {
		rr := pc.ExecParams(ctx, fetch, nil, nil, nil, nil)
		rows := 0
		var fnErr error
		for rr.NextRow() {
			rows++
			if fnErr == nil {
				fnErr = fn(rr.Values())
			}
		}
		if _, err := rr.Close(); err != nil {
			return fmt.Errorf("fetch outbox rows: %w", err)
		}
		if fnErr != nil {
			return fnErr
		}
		if rows < batch {
			return nil
		}
	}
}

// decodeRow turns the n-th row into a message or a bad row; vals holds the
// table's columns, then the commit time when tracked.
func decodeRow(dec *decoder.RowDecoder, t *table, cfg *Config, vals [][]byte, n int64) (*schema.Message, *decoder.BadRowError, error) {
	var commit time.Time
	if t.commitTS {
		if v := vals[len(t.cols)]; v != nil {
			us, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("read a commit time %q: %w", v, err)
			}
			commit = time.UnixMicro(us).UTC()
		}
		vals = vals[:len(t.cols)]
	}
	if n > int64(^uint32(0)) {
		return nil, nil, errors.New("more than 4294967295 rows in one run: select fewer")
	}
	m, err := dec.Decode(vals, schema.Position{CommitLSN: cfg.Position, Seq: uint32(n)}, commit)
	if bad, ok := decoder.AsBadRow(err); ok {
		return nil, bad, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if cfg.Rewrite != nil {
		cfg.Rewrite(m)
	}
	return m, nil, nil
}

// publisher is the sink of one run, counting acks and parked rows, and
// the progress lines.
type publisher struct {
	ctx     context.Context
	cfg     *Config
	s       *sink.Sink
	acked   atomic.Int64
	parked  atomic.Int64
	total   int64
	began   time.Time
	started bool
	cancel  context.CancelFunc
	runErr  chan error
	stop    chan struct{}
	done    chan struct{}
}

func newPublisher(ctx context.Context, cfg Config, log *zap.Logger) (*publisher, error) {
	p := &publisher{ctx: ctx, cfg: &cfg, runErr: make(chan error, 1), stop: make(chan struct{}), done: make(chan struct{})}
	sc := cfg.Sink
	if park := sc.Park; park != nil {
		sc.Park = func(ctx context.Context, dl schema.DeadLetter) (bool, error) {
			parked, err := park(ctx, dl)
			if parked && err == nil {
				p.parked.Add(1)
			}
			return parked, err
		}
	}
	var err error
	if p.s, err = sink.New(sc, log, func(uint64) { p.acked.Add(1) }); err != nil {
		return nil, err
	}
	return p, nil
}

// start runs the sink and the progress lines once the total is known.
func (p *publisher) start(total int64) {
	p.total, p.began, p.started = total, time.Now(), true
	var ctx context.Context
	ctx, p.cancel = context.WithCancel(p.ctx)
	go func() { p.runErr <- p.s.Run(ctx) }()
	go p.progress()
}

func (p *publisher) publish(n int64, m *schema.Message, bad *decoder.BadRowError) error {
	if bad != nil {
		return p.s.PublishBad(p.ctx, bad, uint64(n))
	}
	return p.s.Publish(p.ctx, m, uint64(n))
}

// end closes the sink and returns how it ended: once everything queued is
// acknowledged, or at once when abort (the read failed). It stops the
// progress lines.
func (p *publisher) end(abort bool) error {
	if !p.started {
		return nil
	}
	p.s.Close()
	if abort {
		p.cancel()
	}
	err := <-p.runErr
	p.cancel()
	close(p.stop)
	<-p.done
	return err
}

// progress prints a line every interval until stopped: rows done of the
// total, the rate since the start, and the time left at that rate.
func (p *publisher) progress() {
	defer close(p.done)
	if p.cfg.Progress == nil {
		<-p.stop
		return
	}
	t := time.NewTicker(p.cfg.ProgressInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			fmt.Fprintln(p.cfg.Progress, progressLine(p.cfg.Verb, p.acked.Load(), p.total, time.Since(p.began)))
		}
	}
}

// progressLine is "recover: 12000 of 100000 rows (12%), 8100 rows/s, about
// 11s left".
func progressLine(verb string, done, total int64, took time.Duration) string {
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	line := fmt.Sprintf("%s: %d of %d rows (%.0f%%)", verb, done, total, pct)
	if done == 0 || took <= 0 {
		return line + ", waiting for the first acknowledgement"
	}
	rate := float64(done) / took.Seconds()
	left := time.Duration(float64(total-done) / rate * float64(time.Second))
	return fmt.Sprintf("%s, %.0f rows/s, about %s left", line, rate, left.Round(time.Second))
}
