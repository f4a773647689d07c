package slot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// readRecovery reads the fixture slot's recovery on conn and fails the test
// on an error.
func (f *fixture) readRecovery(conn *pgx.Conn) (slot.Recovery, bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, found, err := slot.ReadRecovery(ctx, conn, f.recoveries(), f.slot)
	if err != nil {
		f.t.Fatalf("ReadRecovery: got %v; want nil", err)
	}
	return r, found
}

// ensureRecoveries creates the fixture's recoveries table with
// EnsureRecoveryTable, which the test's cleanup drops.
func (f *fixture) ensureRecoveries() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := slot.EnsureRecoveryTable(ctx, f.conn, f.schemaConfig()); err != nil {
		f.t.Fatalf("EnsureRecoveryTable: got %v; want nil", err)
	}
}

// A recovery goes pending, gets its slot's consistent point, finishes; a
// new one replaces it whole. Without the table, or without a row for the
// slot, there is none.
func TestRecoveryLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, found := f.readRecovery(f.conn); found {
		t.Fatal("ReadRecovery without the table: found one; want none")
	}
	f.ensureRecoveries()
	f.ensureRecoveries() // a second time is safe
	if _, found := f.readRecovery(f.conn); found {
		t.Fatal("ReadRecovery of an empty table: found one; want none")
	}

	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	begin := slot.Recovery{Slot: f.slot, Since: &since, StartedBy: "host-a:4242", ForceReason: "slot stuck on a bad row"}
	if err := slot.BeginRecovery(ctx, f.conn, f.recoveries(), begin); err != nil {
		t.Fatalf("BeginRecovery: got %v; want nil", err)
	}
	r, found := f.readRecovery(f.conn)
	if !found || !r.Pending() || r.Slot != f.slot || r.Since == nil || !r.Since.Equal(since) || r.StartedBy != "host-a:4242" ||
		r.ForceReason != "slot stuck on a bad row" || r.ConsistentLSN != 0 || time.Since(r.StartedAt).Abs() > time.Minute {
		t.Fatalf("after BeginRecovery: got %+v, found %v; want it pending as begun, started now, no LSN", r, found)
	}

	if err := slot.SetRecoveryLSN(ctx, f.conn, f.recoveries(), f.slot, 0x3000060); err != nil {
		t.Fatalf("SetRecoveryLSN: got %v; want nil", err)
	}
	if err := slot.FinishRecovery(ctx, f.conn, f.recoveries(), f.slot, 99990, 10); err != nil {
		t.Fatalf("FinishRecovery: got %v; want nil", err)
	}
	r, _ = f.readRecovery(f.conn)
	if r.Pending() || r.ConsistentLSN != 0x3000060 || r.Published != 99990 || r.Parked != 10 || r.FinishedAt.Before(r.StartedAt) {
		t.Errorf("after FinishRecovery: got %+v; want finished, at 0/3000060, 99990 published, 10 parked", r)
	}
	for name, err := range map[string]error{
		"FinishRecovery": slot.FinishRecovery(ctx, f.conn, f.recoveries(), f.slot, 1, 1),
		"SetRecoveryLSN": slot.SetRecoveryLSN(ctx, f.conn, f.recoveries(), f.slot, 0x4000000),
	} {
		if err == nil || !strings.Contains(err.Error(), "no pending recovery") {
			t.Errorf("%s of a finished recovery: got %v; want an error saying none is pending", name, err)
		}
	}

	// Every row, by another process, no slot replaced: nothing of the last
	// recovery is left.
	if err := slot.BeginRecovery(ctx, f.conn, f.recoveries(), slot.Recovery{Slot: f.slot, StartedBy: "host-b:7"}); err != nil {
		t.Fatalf("BeginRecovery again: got %v; want nil", err)
	}
	r, _ = f.readRecovery(f.conn)
	if !r.Pending() || r.Since != nil || r.StartedBy != "host-b:7" || r.ForceReason != "" || r.ConsistentLSN != 0 || r.Published != 0 || r.Parked != 0 {
		t.Errorf("after the second BeginRecovery: got %+v; want pending for every row, by host-b:7, nothing else", r)
	}
	var n int
	if err := f.conn.QueryRow(ctx, "SELECT count(*) FROM "+f.recoveries().Quoted()).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows of the recoveries table: got %d, %v; want 1 (one per slot)", n, err)
	}
}

// A role that may not create the table is told who must; one that may not
// read it gets an error, never "no recovery".
func TestRecoveryTablePrivileges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.role(""))
	if err != nil {
		t.Fatalf("connect as a role of no privileges: got %v; want nil", err)
	}
	defer conn.Close(context.Background())

	err = slot.EnsureRecoveryTable(ctx, conn, f.schemaConfig())
	if err == nil || !strings.Contains(err.Error(), "may not create it") || !strings.Contains(err.Error(), schema.GrantsForRole) {
		t.Errorf("EnsureRecoveryTable without CREATE: got %v; want it to say the owner applies %s", err, schema.GrantsForRole)
	}
	f.ensureRecoveries()
	if err := slot.EnsureRecoveryTable(ctx, conn, f.schemaConfig()); err != nil {
		t.Errorf("EnsureRecoveryTable once the owner made it: got %v; want nil", err)
	}
	_, found, err := slot.ReadRecovery(ctx, conn, f.recoveries(), f.slot)
	if err == nil || found || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("ReadRecovery without SELECT: got found %v, %v; want a permission error", found, err)
	}
}
