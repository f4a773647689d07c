package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

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

// Check is the PostgreSQL half of `walrelay check`: whether the server can
// be reached and how the connection is protected (TLS), then every rule
// the preflight refuses on, each as check.Results in that order. It
// connects once over a normal connection, writes nothing and creates
// nothing. When the server cannot be reached it returns that failure alone:
// the other checks are left out, not guessed. It also reads the routes of
// the latest outbox rows, for the Kafka half to know the topics, with the
// table's columns as cfg.Columns names them. ctx bounds it all.
func Check(ctx context.Context, cfg Config) ([]check.Result, Routes) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return []check.Result{check.Failure("postgres config", err.Error(), "Correct the PostgreSQL settings of walrelay.")},
			Routes{Err: err}
	}
	conn, err := connect(ctx, &cfg)
	if err != nil {
		return []check.Result{check.Failure("postgres reachable", err.Error(),
				"Check "+SettingConnString+" and that the server accepts this client (listen_addresses, pg_hba.conf, firewall, password).")},
			Routes{Err: errors.New("postgres is not reachable")}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f := readFacts(ctx, conn, &cfg)
	results := append(one(reachableResult(f, conn)), judge(f, versionRules)...)
	results = append(results, tlsResult(cfg.ConnString, conn.PgConn()))
	results = append(results, judge(f, settingRules, roleRules, tableRules, publicationRules, recoveryRules, slotRules, failoverRules)...)
	results = append(results, checkStandbys(ctx, &cfg, conn.PgConn().Conn().RemoteAddr().String(), cfg.Slot)...)
	switch {
	case f.tableErr != nil || !f.tableExists:
		return results, Routes{Err: fmt.Errorf("table %s does not exist", cfg.Table)}
	case f.columnsErr != nil:
		return results, Routes{Err: f.columnsErr}
	case decoder.CheckColumns(cfg.decoderConfig(), f.columns) != nil:
		return results, Routes{Err: fmt.Errorf("the rows of %s cannot be decoded (see the table columns check)", cfg.Table)}
	}
	routes := readRoutes(ctx, conn, &cfg, f.columns)
	for i, o := range f.others {
		if routes.Err != nil {
			break
		}
		if o.tableErr != nil || !o.tableExists || o.columnsErr != nil {
			routes = Routes{Err: fmt.Errorf("table %s cannot be read (see its checks)", o.cfg.Table)}
			break
		}
		more := readRoutes(ctx, conn, o.cfg, o.columns)
		if more.Err != nil {
			routes = more
			break
		}
		for _, m := range more.Messages {
			m.Table = i + 1
			routes.Messages = append(routes.Messages, m)
		}
		routes.Rows += more.Rows
	}
	return results, routes
}

// reachableResult says where the connection went, and as whom when the
// server said.
func reachableResult(f *facts, conn *pgx.Conn) check.Result {
	where := conn.PgConn().Conn().RemoteAddr().String()
	if f.serverErr != nil {
		return check.Pass("postgres reachable", "connected to "+where)
	}
	return check.Pass("postgres reachable", fmt.Sprintf("connected to %s, database %s, role %s", where, f.server.database, f.server.user))
}

// readRoutes reads the distinct routing fields of the latest routeRows rows
// of the table: latest by the age of the transaction that wrote them (xmin),
// which needs no index; on a large table it is one scan with a bounded sort.
// cols are the table's columns: a missing optional topic column reads as no
// topic, and a NULL or missing aggregate type as cfg.AggregateTypeDefault.
func readRoutes(ctx context.Context, conn *pgx.Conn, cfg *Config, cols []decoder.Column) Routes {
	has := func(name string) bool {
		return slices.ContainsFunc(cols, func(c decoder.Column) bool { return c.Name == name })
	}
	topic, aggType := "NULL::text", "$1::text"
	if has(cfg.Columns.Topic) {
		topic = schema.QuoteIdentifier(cfg.Columns.Topic) + "::text"
	}
	if has(cfg.Columns.AggregateType) {
		aggType = "coalesce(" + schema.QuoteIdentifier(cfg.Columns.AggregateType) + "::text, $1::text)"
	}
	var def *string // NULL without a default
	if cfg.AggregateTypeDefault != "" {
		def = &cfg.AggregateTypeDefault
	}
	var at, ty, tp []string
	var r Routes
	err := conn.QueryRow(ctx, fmt.Sprintf(routesSQL, aggType, schema.QuoteIdentifier(cfg.Columns.Type),
		topic, cfg.Table.Quoted(), routeRows), def).Scan(&at, &ty, &tp, &r.Rows)
	if err != nil {
		return Routes{Err: fmt.Errorf("read the latest rows of %s: %w", cfg.Table, err)}
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
