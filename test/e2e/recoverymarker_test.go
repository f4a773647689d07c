package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
	"github.com/walrelay/walrelay/test/harness"
)

// recoveries is the fixture's recoveries table, beside its dead-letter
// table.
func recoveries(f *harness.Fixture) schema.Table {
	return schema.Table{Schema: "public", Name: f.Table + "_recoveries"}
}

// `walrelay init` creates the recoveries table when its role may, and
// otherwise says who must; its line names the table.
func TestInitCreatesTheRecoveriesTable(t *testing.T) {
	f := harness.New(t, "order")
	ctx := context.Background()
	rec := recoveries(f)
	_, err := f.DB.Exec(ctx, "DROP TABLE "+rec.Quoted())
	testkit.Must(t, err, "drop %s", rec)

	_, stderr, code := f.Walrelay("init")
	if code != 1 || !strings.Contains(stderr, "recoveries table "+rec.String()+" does not exist and this role may not create it") ||
		!strings.Contains(stderr, "walrelay schema --grant-to") {
		t.Errorf("init as walrelay's role: exit %d, stderr %q; want exit 1 saying the owner applies `walrelay schema --grant-to`", code, stderr)
	}
	out := f.WalrelayOK("init", "--postgres-url", f.PGURL) // the tables' owner
	if want := "recoveries table " + rec.String() + " and topics table "; !strings.Contains(out, want) {
		t.Errorf("init said %q; want it to contain %q", out, want)
	}
	var exists bool
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", rec.Quoted()).Scan(&exists), "look for %s", rec)
	if !exists {
		t.Errorf("after init: table %s does not exist; want it created", rec)
	}
}

// While a recovery of the slot is pending, `walrelay run` refuses at its
// preflight with the recovery's line and `check` fails on it; once it is
// finished, run streams.
func TestRunRefusesWhileARecoveryIsPending(t *testing.T) {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	ctx := context.Background()
	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	err := slot.BeginRecovery(ctx, f.DB, recoveries(f), slot.Recovery{Slot: f.Slot, Since: &since, StartedBy: "e2e:1"})
	testkit.Must(t, err, "mark a recovery pending")

	_, stderr, code := f.Walrelay("run")
	want := fmt.Sprintf(`walrelay: recovery: a recovery of slot %q (rows since 2025-03-01T12:00:00Z, started at `, f.Slot)
	if line := lastLine(stderr); code != 1 || !strings.HasPrefix(line, want) ||
		!strings.HasSuffix(line, "by e2e:1) is pending; fix: Run `walrelay recover` again to finish it; walrelay will not stream before that.") {
		t.Errorf("run: exit %d, last line %q; want exit 1 and %q...", code, line, want)
	}
	_, report := runCheck(t, f)
	if c := findCheck(report, "recovery"); c.Status != "fail" || !strings.Contains(c.Found, "is pending") {
		t.Errorf("check: recovery %+v; want it failing, pending", c)
	}

	testkit.Must(t, slot.FinishRecovery(ctx, f.DB, recoveries(f), f.Slot, 0, 0), "finish the recovery")
	f.Run().WaitStarted()
}
