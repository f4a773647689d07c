package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

// facts are what the rules judge: the server, its settings, the role, the
// outbox table, the publication, the slot and its last recovery, as read
// on one normal connection. Each group keeps the error that kept it from being read, so
// that a rule reports an unreadable fact as such and never guesses it.
type facts struct {
	cfg *Config
	// others are the facts of the slot's further outbox tables
	// (Config.Tables[1:]): each a copy of these with its own cfg (the
	// table's name and columns in the one table's fields) and its own
	// table facts. The table rules judge each (forEachTable).
	others []*facts

	server    serverFacts
	serverErr error

	settings    serverSettings
	settingsErr error

	role    roleFacts
	roleErr error

	tableExists bool
	tableErr    error
	// partitions are the leaf partitions of a partitioned outbox table;
	// nil for a plain table.
	partitions []schema.Table

	// columns are the outbox table's columns as pgoutput sends them (read
	// only when the table exists).
	columns    []decoder.Column
	columnsErr error

	pub    PublicationStatus
	pubErr error

	// creator is read only when the publication is missing and the table
	// exists: it is what decides whether `walrelay init` could create it.
	creator    creatorFacts
	creatorErr error
	creatorSet bool

	figures    Figures
	figuresErr error

	// recovery is the slot's last recovery; recoveryFound is false when it
	// has none, or there is no recoveries table.
	recovery      Recovery
	recoveryFound bool
	recoveryErr   error

	ha    haFacts
	haErr error

	conn connFacts

	// provider is who runs the server, as its roles and settings show,
	// and the signal that showed it.
	provider         provider
	providerEvidence string
	providerErr      error
}

// haFacts are what a failover depends on: whether the server is a
// standby, and on a primary its standbys, their physical slots and the
// settings that keep a failover slot in step (PostgreSQL 17 and later).
type haFacts struct {
	inRecovery bool
	// standbys counts the physical replication connections (walsenders
	// streaming WAL to a standby).
	standbys int
	// physicalSlots are the names of the server's physical slots.
	physicalSlots []string
	// syncStandbySlots is synchronized_standby_slots (17 and later; nil
	// before).
	syncStandbySlots *string
	// idleTimeout is idle_replication_slot_timeout (18 and later; nil
	// before).
	idleTimeout *string
}

// serverFacts are the connection's database and role and the server's
// version.
type serverFacts struct {
	database, user string
	version        string // server_version, e.g. "15.4"
	versionNum     int    // server_version_num, e.g. 150004
}

// serverSettings are the settings logical replication depends on, and how
// much of the slot and sender capacity is in use.
type serverSettings struct {
	walLevel               string
	maxSlots, maxSenders   int
	slotsUsed, sendersUsed int
	keepSize               *string // nil before PostgreSQL 13
}

// roleFacts are the role's attributes, its CONNECT privilege, its
// membership of the providers' replication roles, and what the server said
// to a replication connection opened as it: the verdict. The attributes
// only explain it, as a managed server grants replication its own way
// (RDS and Aurora by membership of rds_replication, the role's
// rolreplication staying false).
type roleFacts struct {
	super, replication, connect bool
	// providerRoles are the provider roles of providerReplicationRoles
	// that exist on the server, each with whether the role is a member.
	providerRoles map[string]bool
	// probeErr is why a replication connection (IDENTIFY_SYSTEM) failed;
	// nil when it worked.
	probeErr error
}

// providerReplicationRoles are the roles through which a managed server
// grants replication: on Amazon RDS and Aurora, rds_replication ("grants
// permissions to manage logical slots and to stream data using logical
// slots", AWS: Performing logical replication for Amazon RDS for
// PostgreSQL).
var providerReplicationRoles = []string{"rds_replication"}

// creatorFacts say whether the role may create the publication: CREATE
// PUBLICATION takes owning the table (or a role that does) and CREATE on
// the database.
type creatorFacts struct {
	owner        string // the table's owner
	owns, create bool
}

const settingsSQL = `SELECT current_setting('wal_level'),
	current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int,
	(SELECT count(*) FROM pg_replication_slots),
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'),
	current_setting('max_slot_wal_keep_size', true)`

// readFacts reads every fact the rules judge. It writes nothing.
func readFacts(ctx context.Context, conn *pgx.Conn, cfg *Config) *facts {
	f := &facts{cfg: cfg}
	f.serverErr = conn.QueryRow(ctx, `SELECT current_database(), current_user,
		current_setting('server_version_num')::int, current_setting('server_version')`).
		Scan(&f.server.database, &f.server.user, &f.server.versionNum, &f.server.version)
	s := &f.settings
	f.settingsErr = conn.QueryRow(ctx, settingsSQL).Scan(&s.walLevel, &s.maxSlots, &s.maxSenders, &s.slotsUsed, &s.sendersUsed, &s.keepSize)
	f.roleErr = conn.QueryRow(ctx, `SELECT rolsuper, rolreplication, has_database_privilege(current_database(), 'CONNECT')
		FROM pg_roles WHERE rolname = current_user`).Scan(&f.role.super, &f.role.replication, &f.role.connect)
	var pf providerFacts
	if pf, f.providerErr = readProviderFacts(ctx, conn); f.providerErr == nil {
		f.provider, f.providerEvidence = pf.detect()
		f.role.providerRoles = map[string]bool{}
		for _, r := range providerReplicationRoles {
			if member, ok := pf.roles[r]; ok {
				f.role.providerRoles[r] = member
			}
		}
	}
	f.conn.separate = cfg.ReplicationConnString != "" && cfg.ReplicationConnString != cfg.ConnString
	f.role.probeErr = probeReplication(ctx, cfg, &f.conn)
	if f.conn.separate {
		// Unreadable where pg_control_system is revoked: the database names
		// are compared then.
		_ = conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&f.conn.sqlSystem)
	}
	readSession(ctx, cfg, &f.conn)
	f.readTable(ctx, conn)
	for i := 1; i < len(cfg.tables()); i++ {
		o := &facts{cfg: cfg.forTable(i)}
		o.readTable(ctx, conn)
		f.others = append(f.others, o)
	}
	f.readPublication(ctx, conn)
	for _, o := range f.others {
		o.server, o.serverErr, o.role, o.roleErr = f.server, f.serverErr, f.role, f.roleErr
	}
	f.readFigures(ctx, conn)
	f.recovery, f.recoveryFound, f.recoveryErr = ReadRecovery(ctx, conn, cfg.Recoveries, cfg.Slot)
	f.ha, f.haErr = readHA(ctx, conn)
	return f
}

// readTable reads whether the outbox table exists and, when it does, its
// columns and partitions.
func (f *facts) readTable(ctx context.Context, conn *pgx.Conn) {
	t := f.cfg.Table
	f.tableExists, f.tableErr = tableExists(ctx, conn, t)
	if f.tableErr == nil && f.tableExists {
		f.columns, f.columnsErr = readColumns(ctx, conn, t)
		f.partitions, f.tableErr = readPartitions(ctx, conn, t)
	}
}

// haSQL counts the physical walsenders as standbys: those connected to no
// database (a logical walsender is connected to one, whatever it does:
// streaming, exporting a snapshot, or releasing its slot as it exits).
// datid is visible to any role, unlike most of pg_stat_replication.
const haSQL = `SELECT pg_is_in_recovery(),
	(SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_activity a ON a.pid = r.pid WHERE a.datid IS NULL),
	coalesce((SELECT array_agg(slot_name::text ORDER BY slot_name) FROM pg_replication_slots WHERE slot_type = 'physical'), '{}'),
	current_setting('synchronized_standby_slots', true),
	current_setting('idle_replication_slot_timeout', true)`

// readHA reads the server's place in a primary/standby pair.
func readHA(ctx context.Context, conn *pgx.Conn) (haFacts, error) {
	var h haFacts
	err := conn.QueryRow(ctx, haSQL).Scan(&h.inRecovery, &h.standbys, &h.physicalSlots, &h.syncStandbySlots, &h.idleTimeout)
	if err != nil {
		return h, fmt.Errorf("read replication state: %w", err)
	}
	return h, nil
}

// readPublication (re)reads the publication and, when it is missing, who
// may create it.
func (f *facts) readPublication(ctx context.Context, conn *pgx.Conn) {
	f.pub, f.pubErr = readPublication(ctx, conn, f.cfg.Publication)
	f.creatorSet = false
	if f.pubErr == nil && !f.pub.Exists && f.tableErr == nil && f.tableExists {
		f.creator, f.creatorErr = readCreator(ctx, conn, f.cfg.Table)
		f.creatorSet = true
	}
	for _, o := range f.others {
		o.pub, o.pubErr = f.pub, f.pubErr
	}
}

// readFigures (re)reads the slot's figures.
func (f *facts) readFigures(ctx context.Context, conn *pgx.Conn) {
	f.figures, f.figuresErr = ReadFigures(ctx, conn, f.cfg.Slot)
}

// err is the first error that kept a fact from being read. A preflight
// returns it as it is: a failed read is no verdict on the setup, and the
// next attempt may read it.
func (f *facts) err() error {
	errs := []error{f.serverErr, f.settingsErr, f.providerErr, f.roleErr, f.tableErr, f.columnsErr, f.pubErr, f.creatorErr, f.figuresErr, f.recoveryErr, f.haErr}
	for _, o := range f.others {
		errs = append(errs, o.tableErr, o.columnsErr)
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("read the server's setup: %w", err)
		}
	}
	return nil
}

// tableNames are the slot's outbox tables, in order.
func (f *facts) tableNames() []schema.Table {
	out := []schema.Table{f.cfg.Table}
	for _, o := range f.others {
		out = append(out, o.cfg.Table)
	}
	return out
}

// outboxTables are every outbox table of the slot with its partitions: what
// the publication may publish besides nothing else.
func (f *facts) outboxTables() []schema.Table {
	out := append([]schema.Table{f.cfg.Table}, f.partitions...)
	for _, o := range f.others {
		out = append(out, o.cfg.Table)
		out = append(out, o.partitions...)
	}
	return out
}

// partitionsSQL lists the leaf partitions of $1 when it is partitioned.
const partitionsSQL = `SELECT n.nspname::text, c.relname::text
	FROM pg_partition_tree($1::regclass) p JOIN pg_class c ON c.oid = p.relid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE p.isleaf AND p.level > 0 ORDER BY 1, 2`

// readPartitions reads the leaf partitions of t (none for a plain table).
func readPartitions(ctx context.Context, conn *pgx.Conn, t schema.Table) ([]schema.Table, error) {
	rows, err := conn.Query(ctx, partitionsSQL, t.Quoted())
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %s: %w", t, err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (schema.Table, error) {
		var p schema.Table
		return p, r.Scan(&p.Schema, &p.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %s: %w", t, err)
	}
	return parts, nil
}

func tableExists(ctx context.Context, conn *pgx.Conn, t schema.Table) (bool, error) {
	var exists bool
	err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t.Quoted()).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("look up table %s: %w", t, err)
	}
	return exists, nil
}

// columnsSQL lists a table's columns as pgoutput sends them: in attnum
// order, without dropped and generated ones (pgoutput leaves generated
// columns out by default).
const columnsSQL = `SELECT a.attname::text, a.atttypid::int8, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attnum`

// readColumns reads the columns of table t, which exists.
func readColumns(ctx context.Context, conn *pgx.Conn, t schema.Table) ([]decoder.Column, error) {
	rows, err := conn.Query(ctx, columnsSQL, t.Quoted())
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (decoder.Column, error) {
		var c decoder.Column
		var oid int64
		err := r.Scan(&c.Name, &oid, &c.TypeName)
		c.Type = uint32(oid)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t, err)
	}
	return cols, nil
}

func readCreator(ctx context.Context, conn *pgx.Conn, t schema.Table) (creatorFacts, error) {
	var c creatorFacts
	err := conn.QueryRow(ctx, `SELECT pg_get_userbyid(relowner), pg_has_role(relowner, 'USAGE'),
		has_database_privilege(current_database(), 'CREATE') FROM pg_class WHERE oid = to_regclass($1)`,
		t.Quoted()).Scan(&c.owner, &c.owns, &c.create)
	if err != nil {
		return c, fmt.Errorf("read the owner of %s: %w", t, err)
	}
	return c, nil
}

// readPublication reads what pg_publication and pg_publication_tables
// say of publication name; a missing one is not an error (Exists false).
func readPublication(ctx context.Context, conn *pgx.Conn, name string) (PublicationStatus, error) {
	var p PublicationStatus
	err := conn.QueryRow(ctx,
		"SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables, pubviaroot FROM pg_publication WHERE pubname = $1",
		name).Scan(&p.Insert, &p.Update, &p.Delete, &p.Truncate, &p.AllTables, &p.ViaRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read publication %q: %w", name, err)
	}
	p.Exists = true
	rows, err := conn.Query(ctx, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1", name)
	if err != nil {
		return p, fmt.Errorf("read tables of publication %q: %w", name, err)
	}
	p.Tables, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (schema.Table, error) {
		var t schema.Table
		return t, r.Scan(&t.Schema, &t.Name)
	})
	if err != nil {
		return p, fmt.Errorf("read tables of publication %q: %w", name, err)
	}
	return p, nil
}

// extras lists what the publication publishes besides the inserts into
// the outbox tables: other operations, all tables, or other tables. The
// outbox tables' own partitions (listed in place of their table without
// publish_via_partition_root) are not other tables: the partitions rule
// speaks of them. ours are the tables and their partitions.
func (p PublicationStatus) extras(ours []schema.Table) []string {
	var more []string
	for _, op := range []struct {
		on   bool
		name string
	}{{p.Update, "update"}, {p.Delete, "delete"}, {p.Truncate, "truncate"}} {
		if op.on {
			more = append(more, op.name)
		}
	}
	others := 0
	for _, pt := range p.Tables {
		if !slices.Contains(ours, pt) {
			others++
		}
	}
	switch {
	case p.AllTables:
		more = append(more, "all tables")
	case others == 1:
		more = append(more, "1 other table")
	case others > 1:
		more = append(more, fmt.Sprintf("%d other tables", others))
	}
	return more
}
