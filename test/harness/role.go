package harness

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RelayRole is the least-privilege role the tests run walrelay as, set up
// as docs/SECURITY.md tells operators to: LOGIN and REPLICATION, CONNECT on
// the database, and on each fixture's tables the GRANTs of `walrelay schema
// --grant-to`. The fixture's own connection (Fixture.DB, Fixture.PGURL) is
// the rig's superuser, which plays the application that owns the tables.
const RelayRole = "walrelay_relay"

// RelayPassword is RelayRole's password (the rig trusts loopback, so it is
// not checked there; the TLS tests use their own role and scram).
const RelayPassword = "Relay-Pw-7f3c9e"

// roleSQL creates RelayRole once; tests of several packages may race to
// it, so a concurrent creation counts as done.
const roleSQL = `DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '` + RelayRole + `') THEN
		CREATE ROLE ` + RelayRole + ` LOGIN REPLICATION PASSWORD '` + RelayPassword + `';
	END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$`

// grantLock serializes the GRANTs of parallel tests (and of other
// packages' tests on the same server): two GRANTs on one object (a
// database, the schema public) at once fail with "tuple concurrently
// updated".
const grantLock = "SELECT pg_advisory_xact_lock(hashtext('walrelay test role'))"

// ExecGrants runs sql, DDL with GRANTs such as `walrelay schema
// --grant-to`'s, in one transaction holding grantLock.
func ExecGrants(ctx context.Context, db *pgxpool.Pool, sql string) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, grantLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// ensureRelayRole creates RelayRole if needed, lets it connect to the
// fixture's database and returns adminURL with RelayRole's credentials.
func (f *Fixture) ensureRelayRole(ctx context.Context, adminURL string) string {
	f.t.Helper()
	// Fixtures of parallel tests (and of other packages) do this at once:
	// two GRANTs on one database fail with "tuple concurrently updated",
	// so one transaction at a time holds the lock.
	tx, err := f.DB.Begin(ctx)
	if err != nil {
		f.t.Fatalf("create role %s: %v", RelayRole, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	for _, step := range []struct{ what, sql string }{
		{"lock", grantLock},
		{"create role " + RelayRole, roleSQL},
		{"grant connect to " + RelayRole, "DO $$ BEGIN EXECUTE format('GRANT CONNECT ON DATABASE %I TO " + RelayRole + "', current_database()); END $$"},
	} {
		if _, err := tx.Exec(ctx, step.sql); err != nil {
			f.t.Fatalf("%s: %v", step.what, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		f.t.Fatalf("create role %s: %v", RelayRole, err)
	}
	return RoleURL(f.t, adminURL, RelayRole, RelayPassword)
}

// RoleURL is the PostgreSQL URL u with another role and password. A
// keyword/value string gets them appended (the last of a keyword wins).
func RoleURL(t *testing.T, u, role, password string) string {
	t.Helper()
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return u + " user=" + role + " password=" + password
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("parse postgres url: %v", err)
	}
	p.User = url.UserPassword(role, password)
	return p.String()
}
