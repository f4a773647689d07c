package slot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/bytesize"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/check"
	"github.com/walrelay/walrelay/schema"
)

// minServerVersion is the oldest PostgreSQL walrelay supports, as
// server_version_num.
const minServerVersion = 140000

// routeRows bounds the outbox rows Check reads to learn which topics the
// relay will write.
const routeRows = 100_000

// Routes are the distinct routing fields of the latest outbox rows: what
// decides the Kafka topics of their messages.
type Routes struct {
	// Messages have only AggregateType, Type and Topic set, one per distinct
	// combination, sorted.
	Messages []schema.Message
	// Rows is the number of rows read, at most 100000.
	Rows int
	// Err says why the rows could not be read; Messages is then nil.
	Err error
}

// Check is the PostgreSQL half of `walrelay check`: the server, how the
// connection is protected (TLS), its settings, the role, the outbox table,
// the publication and the slot, each as check.Results in that order. It
// connects once over a normal connection, writes nothing and creates
// nothing. When the server cannot be reached it returns that failure alone:
// the other checks are left out, not guessed. It also reads the routes of
// the latest outbox rows, for the Kafka half to know the topics; cols names
// their columns (the zero value means schema.DefaultColumns). ctx bounds it
// all.
func Check(ctx context.Context, cfg Config, cols schema.Columns) ([]check.Result, Routes) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return []check.Result{check.Failure("postgres config", err.Error(), "Correct the PostgreSQL flags of walrelay.")},
			Routes{Err: err}
	}
	conn, err := connect(ctx, &cfg)
	if err != nil {
		return []check.Result{check.Failure("postgres reachable", err.Error(),
				"Check --postgres-url and that the server accepts this client (listen_addresses, pg_hba.conf, firewall, password).")},
			Routes{Err: errors.New("postgres is not reachable")}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	c := &checker{ctx: ctx, conn: conn, cfg: &cfg}
	c.server()
	c.add(tlsResult(cfg.ConnString, conn.PgConn()))
	c.figures, c.figuresErr = ReadFigures(ctx, conn, cfg.Slot)
	c.settings()
	c.role()
	tableOK := c.table()
	c.publication(tableOK)
	c.slot()
	if !tableOK {
		return c.results, Routes{Err: fmt.Errorf("table %s does not exist", cfg.Table)}
	}
	return c.results, readRoutes(ctx, conn, cfg.Table, cols)
}

// checker runs the checks of Check on one connection and collects their
// results. What one check reads and a later one needs is kept here.
type checker struct {
	ctx     context.Context
	conn    *pgx.Conn
	cfg     *Config
	results []check.Result

	database, user string // current_database(), current_user
	super          bool
	figures        Figures
	figuresErr     error
}

func (c *checker) add(r check.Result) { c.results = append(c.results, r) }

// unreadable is the result of a check whose facts could not be read.
func (c *checker) unreadable(name string, err error) {
	c.add(check.Failure(name, "cannot read: "+err.Error(),
		"Fix the cause in the error; the checks read pg_settings, pg_roles, pg_class, pg_publication and pg_replication_slots."))
}

// server reports the connection and the server version.
func (c *checker) server() {
	var version string
	var num int
	err := c.conn.QueryRow(c.ctx, `SELECT current_database(), current_user,
		current_setting('server_version_num')::int, current_setting('server_version')`).
		Scan(&c.database, &c.user, &num, &version)
	where := c.conn.PgConn().Conn().RemoteAddr().String()
	if err != nil {
		c.add(check.Pass("postgres reachable", "connected to "+where))
		c.unreadable("server version", err)
		return
	}
	c.add(check.Pass("postgres reachable", fmt.Sprintf("connected to %s, database %s, role %s", where, c.database, c.user)))
	if num < minServerVersion {
		c.add(check.Failure("server version", "PostgreSQL "+version+"; walrelay needs 14 or newer", "Upgrade the server to PostgreSQL 14 or newer."))
		return
	}
	c.add(check.Pass("server version", "PostgreSQL "+version))
}

// serverSettings are the settings logical replication depends on, and how
// much of the slot and sender capacity is in use.
type serverSettings struct {
	walLevel               string
	maxSlots, maxSenders   int
	slotsUsed, sendersUsed int
	keepSize               *string // nil before PostgreSQL 13
}

const settingsSQL = `SELECT current_setting('wal_level'),
	current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int,
	(SELECT count(*) FROM pg_replication_slots),
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'),
	current_setting('max_slot_wal_keep_size', true)`

// settings reports wal_level, the slot and WAL sender capacity and
// max_slot_wal_keep_size. It needs c.figures, read before.
func (c *checker) settings() {
	var s serverSettings
	err := c.conn.QueryRow(c.ctx, settingsSQL).Scan(&s.walLevel, &s.maxSlots, &s.maxSenders, &s.slotsUsed, &s.sendersUsed, &s.keepSize)
	if err != nil {
		for _, name := range []string{"wal_level", "max_replication_slots", "max_wal_senders", "max_slot_wal_keep_size"} {
			c.unreadable(name, err)
		}
		return
	}
	c.add(walLevelResult(s.walLevel))
	// An unreadable slot counts as missing and inactive: the warnings below
	// then err on the side of saying more.
	c.add(slotsResult(s, c.cfg.Slot, c.figuresErr == nil && c.figures.Exists))
	c.add(sendersResult(s, c.figuresErr == nil && c.figures.Active))
	c.add(keepSizeResult(s.keepSize))
}

func walLevelResult(level string) check.Result {
	if level == "logical" {
		return check.Pass("wal_level", "logical")
	}
	return check.Failure("wal_level", level+"; logical decoding needs logical",
		"Set wal_level = logical (postgresql.conf or ALTER SYSTEM) and restart the server.")
}

func slotsResult(s serverSettings, slot string, exists bool) check.Result {
	const name = "max_replication_slots"
	found := fmt.Sprintf("%d, %d in use", s.maxSlots, s.slotsUsed)
	switch {
	case s.maxSlots == 0:
		return check.Failure(name, found, "Set max_replication_slots to at least 1 (one per walrelay slot) and restart the server.")
	case exists:
		return check.Pass(name, found+fmt.Sprintf(", slot %q among them", slot))
	case s.slotsUsed >= s.maxSlots:
		return check.Warning(name, found+fmt.Sprintf(": none left for slot %q, which does not exist yet", slot),
			"Drop an unused slot, or raise max_replication_slots and restart the server, before `walrelay init`.")
	}
	return check.Pass(name, found)
}

func sendersResult(s serverSettings, slotActive bool) check.Result {
	const name = "max_wal_senders"
	found := fmt.Sprintf("%d, %d in use", s.maxSenders, s.sendersUsed)
	switch {
	case s.maxSenders == 0:
		return check.Failure(name, found, "Set max_wal_senders to at least 1 (one per streaming walrelay) and restart the server.")
	case slotActive:
		return check.Pass(name, found+", one of them streams from the slot")
	case s.sendersUsed >= s.maxSenders:
		return check.Warning(name, found+": none left for walrelay to stream",
			"Stop an unused replication client, or raise max_wal_senders and restart the server.")
	}
	return check.Pass(name, found)
}

func keepSizeResult(keep *string) check.Result {
	const name = "max_slot_wal_keep_size"
	switch {
	case keep == nil:
		return check.Warning(name, "not supported by this server: the WAL kept for a slot is unlimited",
			"Upgrade the server to PostgreSQL 14 or newer and set max_slot_wal_keep_size.")
	case *keep == "-1":
		return check.Warning(name, "-1 (unlimited): a stuck slot keeps WAL until the disk is full",
			"Set max_slot_wal_keep_size to what the WAL disk can spare (e.g. 10GB) and alert on wal_status, which walrelay exports.")
	}
	return check.Pass(name, *keep)
}

// role reports the role's REPLICATION attribute and its CONNECT privilege.
func (c *checker) role() {
	var replication, connect bool
	err := c.conn.QueryRow(c.ctx, `SELECT rolsuper, rolreplication, has_database_privilege(current_database(), 'CONNECT')
		FROM pg_roles WHERE rolname = current_user`).Scan(&c.super, &replication, &connect)
	if err != nil {
		c.unreadable("role replication", err)
		c.unreadable("database connect", err)
		return
	}
	c.add(c.replicationResult(replication))
	if connect {
		c.add(check.Pass("database connect", fmt.Sprintf("role %s may connect to database %s", c.user, c.database)))
	} else {
		c.add(check.Failure("database connect", fmt.Sprintf("role %s has no CONNECT on database %s", c.user, c.database),
			fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s.", schema.QuoteIdentifier(c.database), schema.QuoteIdentifier(c.user))))
	}
}

func (c *checker) replicationResult(replication bool) check.Result {
	const name = "role replication"
	switch {
	case c.super:
		return check.Warning(name, fmt.Sprintf("role %s runs as superuser", c.user),
			"Use a role with REPLICATION only (owning the outbox table for `walrelay init`), not a superuser.")
	case replication:
		return check.Pass(name, fmt.Sprintf("role %s has REPLICATION", c.user))
	}
	return check.Failure(name, fmt.Sprintf("role %s has neither REPLICATION nor superuser", c.user),
		fmt.Sprintf("As a superuser: ALTER ROLE %s REPLICATION.", schema.QuoteIdentifier(c.user)))
}

// table reports whether the outbox table exists.
func (c *checker) table() bool {
	exists, err := tableExists(c.ctx, c.conn, c.cfg.Table)
	switch {
	case err != nil:
		c.unreadable("outbox table", err)
	case exists:
		c.add(check.Pass("outbox table", c.cfg.Table.String()+" exists"))
	default:
		c.add(check.Failure("outbox table", c.cfg.Table.String()+" does not exist",
			"Create it with the DDL that `walrelay schema` prints, or point --table at the outbox table."))
	}
	return exists
}

// publication reports whether the publication exists, publishes the outbox
// inserts, and nothing else. When it is missing and the table exists, it
// reports whether `walrelay init` could create it.
func (c *checker) publication(tableOK bool) {
	name, t := c.cfg.Publication, c.cfg.Table
	p, err := readPublication(c.ctx, c.conn, name)
	if err != nil {
		c.unreadable("publication", err)
		return
	}
	if !p.exists {
		c.add(check.Failure("publication", fmt.Sprintf("publication %q does not exist", name),
			"Run `walrelay init`, which creates it insert-only for the outbox table."))
		if tableOK {
			c.createPublication()
		}
		return
	}
	c.add(check.Pass("publication", fmt.Sprintf("publication %q exists", name)))
	if p.insert {
		c.add(check.Pass("publication inserts", "publishes inserts"))
	} else {
		c.add(check.Failure("publication inserts", fmt.Sprintf("publication %q does not publish inserts", name),
			fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert').", schema.QuoteIdentifier(name))))
	}
	if p.covers(t) {
		c.add(check.Pass("publication table", "includes "+t.String()))
	} else {
		c.add(check.Failure("publication table", fmt.Sprintf("publication %q does not include %s", name, t),
			fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s.", schema.QuoteIdentifier(name), t.Quoted())))
	}
	c.add(scopeResult(p, name, t))
}

// scopeResult warns when the publication publishes more than the outbox
// inserts: walrelay skips the rest, but the server decodes and sends it.
func scopeResult(p publication, name string, t schema.Table) check.Result {
	const result = "publication scope"
	more := p.extras(t)
	if len(more) == 0 {
		return check.Pass(result, "inserts into "+t.String()+" only")
	}
	fix := fmt.Sprintf("ALTER PUBLICATION %[1]s SET (publish = 'insert'), then ALTER PUBLICATION %[1]s SET TABLE %[2]s.",
		schema.QuoteIdentifier(name), t.Quoted())
	if p.all {
		fix = "It works as it is; narrowing a FOR ALL TABLES publication takes a new one FOR TABLE " + t.Quoted() +
			" WITH (publish = 'insert') and a new slot, switched to only once the old slot has caught up."
	}
	return check.Warning(result, fmt.Sprintf("publication %q also publishes %s", name, strings.Join(more, ", ")), fix)
}

// createPublication reports whether the role could create the missing
// publication: CREATE on the database and ownership of the table (or
// superuser), as CREATE PUBLICATION requires.
func (c *checker) createPublication() {
	const name = "publication create"
	var owner string
	var owns, create bool
	err := c.conn.QueryRow(c.ctx, `SELECT pg_get_userbyid(relowner), pg_has_role(relowner, 'USAGE'),
		has_database_privilege(current_database(), 'CREATE') FROM pg_class WHERE oid = to_regclass($1)`,
		c.cfg.Table.Quoted()).Scan(&owner, &owns, &create)
	if err != nil {
		c.unreadable(name, err)
		return
	}
	ddl := schema.CreatePublicationSQL(schema.Config{Table: c.cfg.Table, Publication: c.cfg.Publication})
	switch {
	case c.super || owns && create:
		c.add(check.Pass(name, fmt.Sprintf("role %s may create it: `walrelay init` can", c.user)))
	case !owns:
		c.add(check.Failure(name, fmt.Sprintf("role %s does not own %s (%s does), so `walrelay init` cannot create the publication", c.user, c.cfg.Table, owner),
			fmt.Sprintf("Have %s run: %s.", owner, ddl)))
	default:
		c.add(check.Failure(name, fmt.Sprintf("role %s has no CREATE on database %s, so `walrelay init` cannot create the publication", c.user, c.database),
			fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s, or have the table's owner run: %s.",
				schema.QuoteIdentifier(c.database), schema.QuoteIdentifier(c.user), ddl)))
	}
}

// slot reports whether the slot exists, is a pgoutput slot of this
// database, still has its WAL (wal_status), and how far it lags.
func (c *checker) slot() {
	name, f := c.cfg.Slot, c.figures
	switch {
	case c.figuresErr != nil:
		c.unreadable("slot", c.figuresErr)
		return
	case !f.Exists:
		c.add(check.Failure("slot", fmt.Sprintf("slot %q does not exist", name),
			"Run `walrelay init`, which creates it after the publication."))
		return
	case f.Active:
		c.add(check.Pass("slot", fmt.Sprintf("slot %q exists, in use by pid %d", name, f.ActivePID)))
	default:
		c.add(check.Pass("slot", fmt.Sprintf("slot %q exists, not in use", name)))
	}
	if f.Type == "logical" && f.Plugin == "pgoutput" {
		c.add(check.Pass("slot plugin", "logical, pgoutput"))
	} else {
		c.add(check.Failure("slot plugin", fmt.Sprintf("a %s slot with plugin %q; walrelay needs a logical pgoutput slot", f.Type, f.Plugin),
			"Leave this slot to its client and give walrelay its own --slot, created by `walrelay init`."))
	}
	belongs := fmt.Sprintf("slot %q belongs to database %q, not %q", name, f.Database, c.database)
	if f.Database == "" {
		belongs = fmt.Sprintf("slot %q belongs to no database, not to %q", name, c.database)
	}
	if f.Database == c.database {
		c.add(check.Pass("slot database", c.database))
	} else {
		c.add(check.Failure("slot database", belongs,
			"Point --postgres-url at the slot's database, or give walrelay its own --slot for this one."))
	}
	c.add(walStatusResult(f))
	c.add(lagResult(f))
}

func walStatusResult(f Figures) check.Result {
	const name = "slot wal_status"
	found := f.WALStatus
	if f.SafeWALSize != nil {
		found += fmt.Sprintf(", safe_wal_size %s", bytesize.Format(*f.SafeWALSize))
	}
	switch f.WALStatus {
	case "reserved", "extended":
		return check.Pass(name, found)
	case "unreserved":
		return check.Warning(name, found+": the server will remove WAL the slot still needs at its next checkpoint",
			"Get walrelay streaming and confirming now, or raise max_slot_wal_keep_size, before the slot is lost.")
	case "lost":
		return check.Failure(name, "lost: the server removed WAL the slot needed, so outbox messages may never have been published",
			"Reconcile the outbox table with Kafka, then drop the slot and run `walrelay init`; walrelay never does this itself.")
	}
	return check.Warning(name, fmt.Sprintf("%q: the slot holds no WAL", f.WALStatus),
		"Drop the slot and run `walrelay init` once you know nothing needs its position.")
}

// lagResult is information: how much WAL the slot has not confirmed.
func lagResult(f Figures) check.Result {
	const name = "slot lag"
	if f.ConfirmedFlush == 0 {
		return check.Failure(name, "no confirmed_flush_lsn: the slot is not usable for logical decoding",
			"Drop the slot and run `walrelay init` once you know nothing needs it.")
	}
	return check.Pass(name, fmt.Sprintf("%s (%d bytes) of WAL not confirmed: confirmed_flush_lsn %s, server at %s",
		bytesize.Format(int64(f.LagBytes())), f.LagBytes(), f.ConfirmedFlush, f.CurrentWAL))
}

// readRoutes reads the distinct routing fields of the latest routeRows rows
// of table t: latest by the age of the transaction that wrote them (xmin),
// which needs no index; on a large table it is one scan with a bounded sort.
// A missing optional topic column reads as no topic.
func readRoutes(ctx context.Context, conn *pgx.Conn, t schema.Table, cols schema.Columns) Routes {
	if cols == (schema.Columns{}) {
		cols = schema.DefaultColumns()
	}
	if err := cols.Validate(); err != nil {
		return Routes{Err: err}
	}
	topic := "NULL::text"
	var hasTopic bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)`, t.Quoted(), cols.Topic).Scan(&hasTopic)
	if err != nil {
		return Routes{Err: fmt.Errorf("look up column %s of %s: %w", cols.Topic, t, err)}
	}
	if hasTopic {
		topic = schema.QuoteIdentifier(cols.Topic) + "::text"
	}
	var at, ty, tp []string
	var r Routes
	err = conn.QueryRow(ctx, fmt.Sprintf(routesSQL, schema.QuoteIdentifier(cols.AggregateType), schema.QuoteIdentifier(cols.Type),
		topic, t.Quoted(), routeRows)).Scan(&at, &ty, &tp, &r.Rows)
	if err != nil {
		return Routes{Err: fmt.Errorf("read the latest rows of %s: %w", t, err)}
	}
	r.Messages = make([]schema.Message, len(at))
	for i := range at {
		r.Messages[i] = schema.Message{AggregateType: at[i], Type: ty[i], Topic: tp[i]}
	}
	return r
}

// routesSQL takes the aggregate type, type and topic expressions, the table
// and the row bound. The three arrays are aggregated in the same order.
const routesSQL = `SELECT coalesce(array_agg(at ORDER BY at, ty, tp), '{}'), coalesce(array_agg(ty ORDER BY at, ty, tp), '{}'),
	coalesce(array_agg(tp ORDER BY at, ty, tp), '{}'), coalesce(sum(n), 0)::int
FROM (SELECT coalesce(at, '') AS at, coalesce(ty, '') AS ty, coalesce(tp, '') AS tp, count(*) AS n
	FROM (SELECT %s::text AS at, %s::text AS ty, %s AS tp FROM %s ORDER BY age(xmin) LIMIT %d) latest
	GROUP BY 1, 2, 3) routes`
