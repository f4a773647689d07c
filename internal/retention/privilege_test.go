package retention

import (
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/schema"
)

func TestPrivilegesRefusal(t *testing.T) {
	table := schema.Table{Schema: "public", Name: "outbox_messages"}
	for _, tc := range []struct {
		p      Privileges
		dryRun bool
		lacks  string // "" for no refusal
	}{
		{Privileges{Role: "app", Owner: "app", Select: true, Delete: true}, false, ""},
		{Privileges{Role: "walrelay", Owner: "app", Select: true}, false, "DELETE"},
		{Privileges{Role: "walrelay", Owner: "app", Select: true}, true, ""},
		{Privileges{Role: "nobody", Owner: "app"}, false, "SELECT, DELETE"},
		{Privileges{Role: "nobody", Owner: "app"}, true, "SELECT"},
		{Privileges{Role: "walrelay"}, false, ""}, // no table: Mark says so
	} {
		err := tc.p.refusal(table, tc.dryRun)
		switch {
		case tc.lacks == "" && err != nil:
			t.Errorf("%+v, dry run %v: refused with %v; want no refusal", tc.p, tc.dryRun, err)
		case tc.lacks != "" && (!errors.Is(err, ErrNoPrivilege) || !strings.Contains(err.Error(), "it lacks "+tc.lacks+" on public.outbox_messages") ||
			!strings.Contains(err.Error(), "the table's owner ("+tc.p.Owner+")")):
			t.Errorf("%+v, dry run %v: got %v; want a refusal saying it lacks %s and naming owner %s", tc.p, tc.dryRun, err, tc.lacks, tc.p.Owner)
		}
	}
}
