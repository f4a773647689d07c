package schema

import (
	"fmt"
	"strings"
)

// GrantsForRole is how errors and fixes name the DDL with the grants of
// GrantsSQL for walrelay's role.
const GrantsForRole = "the DDL with schema.GrantsSQL(<role>)"

// GrantsSQL is what the outbox table's owner grants the role walrelay runs
// as, once the tables of DDL exist: USAGE on their schemas, SELECT on the
// outbox table (`walrelay check` reads the latest rows' topics; the role
// reads every row from the WAL anyway), and the reads and writes of the
// dead-letter table (parking, `walrelay dlq`) and of the recoveries table
// beside it (`walrelay recover` writes it; the preflight reads it), and
// of the topics table (run records a topic's partition count; `walrelay
// topics accept` changes it). The
// role itself needs LOGIN and REPLICATION, which only a role with
// CREATEROLE can give; see docs/SECURITY.md. Deleting outbox rows (`walrelay prune`) is not granted.
func GrantsSQL(c Config, role string) (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	if err := ValidateIdentifier("role", role); err != nil {
		return "", err
	}
	r, dl := QuoteIdentifier(role), c.DeadLetterTable()
	var b strings.Builder
	fmt.Fprintf(&b, "-- What walrelay's role %s needs on these tables (run as their owner).\n", commentName(role))
	fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", QuoteIdentifier(c.Table.Schema), r)
	if dl.Schema != c.Table.Schema {
		fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", QuoteIdentifier(dl.Schema), r)
	}
	fmt.Fprintf(&b, "GRANT SELECT ON %s TO %s;\n", c.Table.Quoted(), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s;\n", dl.Quoted(), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s;\n", c.RecoveryTable().Quoted(), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE ON %s TO %s;\n", c.TopicsTable().Quoted(), r)
	return b.String(), nil
}
