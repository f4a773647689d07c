package slot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

// Config says where the slot is and how to talk to the server.
type Config struct {
	// ConnString is a PostgreSQL URL or keyword/value string for the
	// database that holds the outbox table: walrelay's SQL (the facts,
	// dead letters, topics, recover's reads, prune) goes there, and may go
	// through a transaction pooler. Required.
	ConnString string
	// ReplicationConnString is where the replication stream, the slot's
	// commands and the leader's lock session go: a direct endpoint of the
	// same database, never a transaction pooler. walrelay adds
	// replication=database itself for the replication connection.
	// Defaults to ConnString.
	ReplicationConnString string
	// Slot is the logical replication slot. Defaults to "walrelay".
	Slot string
	// Publication and Table name the outbox contract. Required.
	Publication string
	Table       schema.Table
	// Columns and AggregateTypeDefault say how the decoder reads the
	// outbox table (decoder.Config): the "table columns" rule judges the
	// table's columns by them with decoder.CheckColumns, so that a table
	// whose rows cannot be decoded stops walrelay at start instead of
	// parking every row. Columns defaults to schema.DefaultColumns();
	// AggregateTypeDefault to none (the table must then have the column).
	Columns              schema.Columns
	AggregateTypeDefault string
	// ContentTypeColumn is decoder.Config.ContentTypeColumn, judged with
	// the other columns: optional, and of a text type when present.
	// Defaults to none.
	ContentTypeColumn string
	// Tables are the outbox tables of a slot that carries several, all in
	// Publication, each judged by the table rules as Table is, the first
	// being Table. Defaults to none: Table and the fields above are the one
	// table; when set, they are taken from Tables[0].
	Tables []OutboxTable
	// Recoveries is the recoveries table (schema.Config.RecoveryTable): a
	// pending recovery of the slot there stops the preflight, since the
	// slot may not be one to stream from yet. A missing table means none.
	// Defaults to Table's name with _recoveries, in Table's schema.
	Recoveries schema.Table
	// StatusInterval is how often a standby status update is sent. Keep it
	// well under the server's wal_sender_timeout (60s by default).
	// Defaults to 10s.
	StatusInterval time.Duration
	// ConfirmInterval is how often the stream looks whether the safe
	// position moved, and confirms it at once if it did, without waiting
	// for the status interval: the server can recycle WAL sooner, and a
	// crash replays at most about this long of acknowledged messages.
	// Defaults to 250ms; it never exceeds StatusInterval.
	ConfirmInterval time.Duration
	// ConnectTimeout bounds each connection attempt when the URL does not
	// set connect_timeout. Defaults to 10s.
	ConnectTimeout time.Duration
	// TakeOver lets the stream end another process's hold on the slot
	// (pg_terminate_backend of its walsender) instead of waiting for it.
	// Only for a caller that knows the holder is stale: walrelay sets it
	// when it holds the leader lock, which the holder then cannot have; the
	// holder is a leader that was paused or cut off, whose walsender would
	// otherwise keep the slot until wal_sender_timeout. Without the
	// privilege to do so, the stream waits as without TakeOver.
	TakeOver bool
	// MaxMessageBytes bounds one replication message, which holds one row:
	// a larger one fails the stream with a *TooLargeError instead of taking
	// that much memory. Defaults to 64 MiB.
	MaxMessageBytes int
	// ActiveRetryMin and ActiveRetryMax bound the exponential backoff while
	// the slot is in use by another process ("replication slot is
	// active"). Defaults to 1s and 15s.
	ActiveRetryMin, ActiveRetryMax time.Duration
}

// OutboxTable is one outbox table of a slot: its name and how the
// decoder reads it (decoder.Config).
type OutboxTable struct {
	Table                schema.Table
	Columns              schema.Columns
	AggregateTypeDefault string
	ContentTypeColumn    string
}

func (c *Config) setDefaults() {
	if c.Slot == "" {
		c.Slot = "walrelay"
	}
	if len(c.Tables) > 0 {
		t := c.Tables[0]
		c.Table, c.Columns, c.AggregateTypeDefault, c.ContentTypeColumn = t.Table, t.Columns, t.AggregateTypeDefault, t.ContentTypeColumn
	}
	if c.Columns == (schema.Columns{}) {
		c.Columns = schema.DefaultColumns()
	}
	if c.Recoveries.Name == "" && c.Table.Name != "" {
		c.Recoveries = schema.Config{Table: c.Table}.RecoveryTable()
	}
	if c.StatusInterval <= 0 {
		c.StatusInterval = 10 * time.Second
	}
	if c.ConfirmInterval <= 0 {
		c.ConfirmInterval = 250 * time.Millisecond
	}
	c.ConfirmInterval = min(c.ConfirmInterval, c.StatusInterval)
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 20
	}
	if c.ActiveRetryMin <= 0 {
		c.ActiveRetryMin = time.Second
	}
	if c.ActiveRetryMax < c.ActiveRetryMin {
		c.ActiveRetryMax = 15 * time.Second
		if c.ActiveRetryMax < c.ActiveRetryMin {
			c.ActiveRetryMax = c.ActiveRetryMin
		}
	}
}

// validate checks every name that goes into SQL or a replication command.
func (c *Config) validate() error {
	if c.ConnString == "" {
		return fmt.Errorf("postgres url is required")
	}
	if err := schema.ValidateSlotName(c.Slot); err != nil {
		return err
	}
	if err := schema.ValidateIdentifier("publication", c.Publication); err != nil {
		return err
	}
	if err := c.Table.Validate("table"); err != nil {
		return err
	}
	if err := c.Columns.Validate(); err != nil {
		return err
	}
	if _, err := quotedRecoveries(c.Recoveries); err != nil {
		return err
	}
	_, err := decoder.NewTables(c.DecoderConfigs()...)
	return err
}

// decoderConfig is the decoder's view of the table.
func (c *Config) decoderConfig() decoder.Config {
	cols := c.Columns
	if cols == (schema.Columns{}) {
		cols = schema.DefaultColumns()
	}
	return decoder.Config{Table: c.Table, Columns: cols, AggregateTypeDefault: c.AggregateTypeDefault, ContentTypeColumn: c.ContentTypeColumn}
}

// DecoderConfigs are the decoder's view of each outbox table, in Tables'
// order (decoder.NewTables), from a Config whose defaults are set; one,
// of Table, when Tables is empty.
func (c *Config) DecoderConfigs() []decoder.Config {
	tables := c.tables()
	out := make([]decoder.Config, len(tables))
	for i, t := range tables {
		one := Config{Table: t.Table, Columns: t.Columns, AggregateTypeDefault: t.AggregateTypeDefault, ContentTypeColumn: t.ContentTypeColumn}
		out[i] = one.decoderConfig()
	}
	return out
}

// tables are the outbox tables: Tables, or the one of Table and the
// fields beside it when Tables is empty; the first's columns defaulted.
func (c *Config) tables() []OutboxTable {
	if len(c.Tables) == 0 {
		return []OutboxTable{{c.Table, c.Columns, c.AggregateTypeDefault, c.ContentTypeColumn}}
	}
	out := slices.Clone(c.Tables)
	for i := range out {
		if out[i].Columns == (schema.Columns{}) {
			out[i].Columns = schema.DefaultColumns()
		}
	}
	return out
}

// forTable is c as the table rules see table i: its name and columns in
// the fields of the one table.
func (c *Config) forTable(i int) *Config {
	t := c.tables()[i]
	cc := *c
	cc.Table, cc.Columns, cc.AggregateTypeDefault, cc.ContentTypeColumn = t.Table, t.Columns, t.AggregateTypeDefault, t.ContentTypeColumn
	return &cc
}

// pgConfig parses ConnString, or for replication ReplicationConnString,
// applying ConnectTimeout when it sets none. replication adds
// replication=database and the replication session's settings.
func (c *Config) pgConfig(replication bool) (*pgconn.Config, error) {
	if !replication {
		cc, err := c.sqlConfig()
		if err != nil {
			return nil, err
		}
		return &cc.Config, nil
	}
	cc, err := c.parse(c.replicationURL())
	if err != nil {
		return nil, err
	}
	pc := &cc.Config
	// XLogData's own header is 25 bytes; leave room for it and the
	// pgoutput message's framing.
	pc.MaxProtocolMessageBodyLen = c.MaxMessageBytes + 4096
	pc.RuntimeParams["replication"] = "database"
	// pgoutput sends values as the walsender's output functions print
	// them: pin the forms the decoder reads, whatever the server's or
	// role's defaults say.
	pc.RuntimeParams["DateStyle"] = "ISO"
	pc.RuntimeParams["bytea_output"] = "hex"
	return pc, nil
}

// LockConnString is where a session that must stay one server backend
// goes (the leader's lock): the replication URL, which no transaction
// pooler can carry.
func (c Config) LockConnString() string {
	return c.replicationURL()
}

// sessionConfig is a normal connection to the replication URL's server:
// the servers that hold the slot (the standbys' facts), and a session that
// must be one server backend (the lock, verified by SharedSession).
func (c *Config) sessionConfig() (*pgx.ConnConfig, error) {
	cc, err := c.parse(c.replicationURL())
	if err != nil {
		return nil, err
	}
	cc.DefaultQueryExecMode = sqlMode
	return cc, nil
}

func (c *Config) replicationURL() string {
	if c.ReplicationConnString != "" {
		return c.ReplicationConnString
	}
	return c.ConnString
}

// sqlMode is how walrelay's SQL runs, in a form a transaction pooler
// (PgBouncer, Supavisor) carries: pgx's cache-describe mode, where each
// round trip stands alone on the unnamed statement (a describe, cached per
// connection, then parse, bind and execute together), never a named
// prepared statement, which a pooler may hand to another client's server
// connection ("prepared statement ... already exists"). Unlike the exec
// mode, it knows each parameter's type from the server, so a []byte bound
// to a jsonb column is sent as json, not as bytea.
const sqlMode = pgx.QueryExecModeCacheDescribe

// sqlConfig is ConnString for walrelay's SQL, in sqlMode. A URL that sets
// default_query_exec_mode keeps its own.
func (c *Config) sqlConfig() (*pgx.ConnConfig, error) {
	cc, err := c.parse(c.ConnString)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(c.ConnString, "default_query_exec_mode") {
		cc.DefaultQueryExecMode = sqlMode
	}
	return cc, nil
}

// parse parses a connection string as pgx does, so that pgx's own keys
// (default_query_exec_mode, the statement cache sizes) are read here and
// not sent to the server as startup parameters, which a pooler refuses
// ("unsupported startup parameter"). It applies ConnectTimeout when the
// string sets none and names the session walrelay.
func (c *Config) parse(s string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(s)
	if err != nil {
		// pgconn's parse errors can quote the URL, password included.
		return nil, ParseError(err)
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = c.ConnectTimeout
	}
	cc.RuntimeParams["application_name"] = "walrelay"
	return cc, nil
}

// ParseError is a connection string's parse error as walrelay reports it:
// the reason, never the string. pgconn's ParseConfigError redacts the
// password (best effort); an error of another type might quote the string,
// so it is not repeated.
func ParseError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return fmt.Errorf("parse postgres url: %s", pe.Error())
	}
	return errors.New("parse postgres url: invalid connection string")
}

// Defaults is the Config with every optional field at its default: what
// walrelay's flags show and start from.
func Defaults() Config {
	var c Config
	c.setDefaults()
	return c
}
