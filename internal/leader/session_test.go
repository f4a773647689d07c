package leader

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The lock session's dead-client settings must reach the server: without
// them a vanished leader keeps the lock for hours.
func TestSessionSettingsReachServer(t *testing.T) {
	url := os.Getenv("WALRELAY_TEST_PG_URL")
	if url == "" {
		if testing.Short() {
			t.Skip("integration test: needs WALRELAY_TEST_PG_URL (make test starts PostgreSQL)")
		}
		t.Fatal("WALRELAY_TEST_PG_URL is not set: run `make test`, or `scripts/pg.sh start && eval \"$(scripts/pg.sh env)\"`")
	}
	e, err := New(Config{ConnString: url, Slot: "settings"}, nil, nil)
	if err != nil {
		t.Fatalf("New: got %v; want nil", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, e.pg)
	if err != nil {
		t.Fatalf("connect: got %v; want a connection", err)
	}
	defer conn.Close(ctx)
	want := map[string]string{
		"application_name":        "walrelay-leader",
		"tcp_keepalives_idle":     "5",
		"tcp_keepalives_interval": "2",
		"tcp_keepalives_count":    "3",
		"tcp_user_timeout":        "10000", // milliseconds, shown without a unit
		"idle_session_timeout":    "10s",
	}
	for name, v := range want {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatalf("current_setting(%s): %v", name, err)
		}
		if got != v {
			t.Errorf("%s on the lock session: got %q; want %q (a Unix socket URL shows 0)", name, got, v)
		}
	}
}
