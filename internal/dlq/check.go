package dlq

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// Check is the dead-letter half of `walrelay check`: whether table t
// exists and the role holds every privilege parking and the dlq verbs use.
// It reads the catalog on db and writes nothing.
//
// outbox names the outbox table, for the rule that a parked row's message
// id fits the table's message_id column (a uuid column, as tables made
// before message ids of other types have, takes uuid ids only).
func Check(ctx context.Context, db DB, t schema.Table, outbox schema.Config) []check.Result {
	store, err := New(db, t)
	if err != nil {
		return []check.Result{check.Failure("dead-letter table", err.Error(), "Set "+schema.SettingDeadLetters+" to a valid table name.")}
	}
	if err := store.Ready(ctx); err != nil {
		return []check.Result{check.Failure("dead-letter table", err.Error(), "Run `walrelay init`, which creates it, or apply the DDL of `walrelay schema`.")}
	}
	return []check.Result{check.Pass("dead-letter table", store.Table()+" exists"), store.privilegesResult(ctx), store.idResult(ctx, outbox)}
}

// idResult says whether the outbox's message ids fit the dead-letter
// table's message_id and blocked_by columns: text takes any, uuid only a
// uuid message id column's.
func (s *Store) idResult(ctx context.Context, outbox schema.Config) check.Result {
	const name = "dead-letter message ids"
	type types struct{ DL, ID *string }
	rows, err := s.db.Query(ctx, `SELECT
		(SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::text::regclass AND attname = 'message_id' AND NOT attisdropped),
		(SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass($2) AND attname = $3 AND NOT attisdropped)`,
		s.table, outbox.Table.Quoted(), outbox.Columns.MessageID)
	var ts types
	if err == nil {
		ts, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[types])
	}
	dlType, idType := ts.DL, ts.ID
	switch {
	case err != nil:
		return check.Failure(name, fmt.Sprintf("read the message id columns of %s and %s: %v", s.table, outbox.Table, err), "Check that the role may read the catalog.")
	case dlType == nil:
		return check.Failure(name, s.table+" has no message_id column", "Apply the dead-letter table's DDL of `walrelay schema`.")
	case idType == nil:
		return check.Pass(name, s.table+".message_id is "+*dlType+" (the outbox table's message id column is judged above)")
	case *dlType == "uuid" && *idType != "uuid":
		return check.Failure(name,
			fmt.Sprintf("%s.message_id is uuid, and the outbox's message id column %q is %s: a parked row's id would not fit", s.table, outbox.Columns.MessageID, *idType),
			fmt.Sprintf("Have the table's owner run: ALTER TABLE %s ALTER COLUMN message_id TYPE text, ALTER COLUMN blocked_by TYPE text", s.table))
	}
	return check.Pass(name, fmt.Sprintf("%s.message_id is %s, the outbox's message ids %s", s.table, *dlType, *idType))
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
