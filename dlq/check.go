package dlq

import (
	"context"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/check"
	"github.com/walrelay/walrelay/schema"
)

// Check is the dead-letter half of `walrelay check`: whether table t
// exists and the role holds every privilege parking and the dlq verbs use.
// It reads the catalog on db and writes nothing.
func Check(ctx context.Context, db DB, t schema.Table) []check.Result {
	store, err := New(db, t)
	if err != nil {
		return []check.Result{check.Failure("dead-letter table", err.Error(), "Set "+schema.SettingDeadLetters+" to a valid table name.")}
	}
	if err := store.Ready(ctx); err != nil {
		return []check.Result{check.Failure("dead-letter table", err.Error(), "Run `walrelay init`, which creates it, or apply the DDL of `walrelay schema`.")}
	}
	return []check.Result{check.Pass("dead-letter table", store.Table()+" exists"), store.privilegesResult(ctx)}
}

// privilegesResult reports what the role lacks of SELECT, INSERT, UPDATE
// and DELETE on the table.
func (s *Store) privilegesResult(ctx context.Context) check.Result {
	const name = "dead-letter privileges"
	missing, err := s.MissingPrivileges(ctx)
	switch {
	case err != nil:
		return check.Failure(name, err.Error(), "Check that the role may read the catalog.")
	case len(missing) > 0:
		return check.Failure(name,
			fmt.Sprintf("the role lacks %s on %s (parking and `walrelay dlq` need SELECT, INSERT, UPDATE and DELETE)", strings.Join(missing, ", "), s.Table()),
			fmt.Sprintf("Have the table's owner run: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO <role> (or apply %s).", s.Table(), schema.GrantsForRole))
	}
	return check.Pass(name, "SELECT, INSERT, UPDATE, DELETE")
}
