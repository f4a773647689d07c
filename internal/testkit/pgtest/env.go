package pgtest

import (
	"os"
	"testing"
)

// CleanEnv makes pgconn see no PG* variables and no ~/.pgpass or
// ~/.postgresql files, so that only the connection string decides. The
// variables come back when the test ends.
func CleanEnv(t testing.TB) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, name := range []string{"PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD", "PGPASSFILE", "PGOPTIONS",
		"PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGSSLCERTMODE", "PGSSLNEGOTIATION", "PGSSLSNI",
		"PGSERVICE", "PGSERVICEFILE"} {
		t.Setenv(name, "") // restores the value after the test
		os.Unsetenv(name)
	}
}
