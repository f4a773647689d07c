package pgserver

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A standby follows its primary; killed, the primary's place is taken by
// the promoted standby on the next timeline, with the rows it had.
func TestStandbyFollowsAndPromotes(t *testing.T) {
	if os.Getenv("WALRELAY_TEST_PG_BIN") == "" {
		if testing.Short() {
			t.Skip("needs the rig's PostgreSQL (WALRELAY_TEST_PG_BIN)")
		}
		t.Fatal("WALRELAY_TEST_PG_BIN is not set: run `make test`")
	}
	primary := Start(t, nil)
	primary.Exec(t, "CREATE TABLE t (n int)")
	standby := primary.Standby(t, "sb1", nil)
	primary.Exec(t, "INSERT INTO t VALUES (1), (2)")
	waitRows(t, standby, 2)
	before := primary.Timeline(t)
	primary.Kill(t)
	standby.Promote(t)
	standby.Exec(t, "INSERT INTO t VALUES (3)")
	waitRows(t, standby, 3)
	if after := standby.Timeline(t); after != before+1 {
		t.Errorf("timeline after promotion: got %d; want %d", after, before+1)
	}
}

func waitRows(t *testing.T, s *Server, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got int
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, s.URL("walrelay"))
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&got)
			conn.Close(ctx)
		}
		if err == nil && got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("rows on %s: got %d; want %d", s.Host(), got, want)
}
