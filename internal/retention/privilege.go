package retention

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// privilegeSQL says who the session's role is, who owns the table, and
// whether the role may do what prune does to it: SELECT for a dry run,
// DELETE (and SELECT, which its WHERE needs) for a prune, ownership for
// dropping partitions.
const privilegeSQL = `SELECT current_user::text,
	COALESCE((SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass($1)), ''),
	COALESCE(has_table_privilege(to_regclass($1), 'SELECT'), false),
	COALESCE(has_table_privilege(to_regclass($1), 'DELETE'), false),
	COALESCE((SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = to_regclass($1)), false)`

// Privileges is what the session's role may do to the outbox table.
type Privileges struct {
	Role, Owner    string
	Select, Delete bool
	// Owns is the role being (a member of) the owner: what dropping a
	// partition takes.
	Owns bool
}

// ReadPrivileges reads them for table.
func ReadPrivileges(ctx context.Context, db DB, table schema.Table) (Privileges, error) {
	var p Privileges
	err := db.QueryRow(ctx, privilegeSQL, table.Quoted()).Scan(&p.Role, &p.Owner, &p.Select, &p.Delete, &p.Owns)
	if err != nil {
		return Privileges{}, fmt.Errorf("read the privileges on %s: %w", table, err)
	}
	return p, nil
}

// ErrNoPrivilege is the error of a run whose role may not prune (or
// count) the table's rows.
var ErrNoPrivilege = errors.New("may not prune")

// refusal is why the role may not prune (or, dryRun, count) the table's
// rows, naming the role that may; nil when it may.
func (p Privileges) refusal(table schema.Table, dryRun bool) error {
	lacks := p.lacks(dryRun)
	if lacks == "" || p.Owner == "" { // a missing table is Mark's to say
		return nil
	}
	return fmt.Errorf("role %s %w: it lacks %s on %s; run walrelay prune as the table's owner (%s) or a role granted SELECT, DELETE on it, not as walrelay's replication role",
		p.Role, ErrNoPrivilege, lacks, table, p.ownerName())
}

// lacks says which of the privileges a prune (or, dryRun, a count) needs
// the role lacks, as "SELECT, DELETE"; "" when none.
func (p Privileges) lacks(dryRun bool) string {
	var out []string
	if !p.Select {
		out = append(out, "SELECT")
	}
	if !p.Delete && !dryRun {
		out = append(out, "DELETE")
	}
	return strings.Join(out, ", ")
}

func (p Privileges) ownerName() string {
	if p.Owner == "" {
		return "unknown: the table was not found"
	}
	return p.Owner
}

// Check says whether the session's role may prune table: not a failure
// when it may not (walrelay's own role should not; the table's owner runs
// prune), but check's report tells who can.
func Check(ctx context.Context, db DB, table schema.Table) check.Result {
	const name = "prune privileges"
	p, err := ReadPrivileges(ctx, db, table)
	switch {
	case err != nil:
		return check.Warning(name, err.Error(), "Check that the role may read the catalog.")
	case p.lacks(false) == "":
		return check.Pass(name, fmt.Sprintf("role %s may run walrelay prune on %s (SELECT, DELETE)", p.Role, table))
	}
	return check.Pass(name, fmt.Sprintf("role %s may not run walrelay prune on %s (it lacks %s), as a replication role should not: the table's owner %s runs it",
		p.Role, table, p.lacks(false), p.ownerName()))
}
