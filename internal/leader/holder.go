package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Holder is the server session that holds a slot's leader lock, as
// pg_locks and pg_stat_activity show it.
type Holder struct {
	PID uint32
	// ApplicationName and ClientAddr are empty when the querying role may
	// not see them (another role's session without pg_read_all_stats) or,
	// for ClientAddr, on a Unix socket.
	ApplicationName string
	ClientAddr      string
}

// Querier runs one query; *pgx.Conn and *pgxpool.Pool are Queriers.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// FindHolder reports who holds the leader lock of slot in q's database;
// found is false when nobody does. For `walrelay status`.
func FindHolder(ctx context.Context, q Querier, slot string) (h Holder, found bool, err error) {
	var database string
	if err := q.QueryRow(ctx, "SELECT current_database()").Scan(&database); err != nil {
		return Holder{}, false, fmt.Errorf("find leader lock holder: %w", err)
	}
	return findHolder(ctx, q, LockKey(database, slot))
}

const holderSQL = `SELECT l.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), '')
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::int8 = $1 AND l.objid::int8 = $2
LIMIT 1`

func findHolder(ctx context.Context, q Querier, key int64) (Holder, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	classid, objid := lockTag(key)
	var h Holder
	err := q.QueryRow(ctx, holderSQL, classid, objid).Scan(&h.PID, &h.ApplicationName, &h.ClientAddr)
	if errors.Is(err, pgx.ErrNoRows) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("find leader lock holder: %w", err)
	}
	return h, true, nil
}
