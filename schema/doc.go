// Package schema is the outbox contract: the table walrelay reads, the
// publication that exposes it, the Message a row becomes, and the rules for
// the names that go into SQL and replication commands.
//
// It is a leaf: it imports no other walrelay package, so the decoder, the
// sink and the command can all share one definition of a message.
//
// Column names are configurable (Columns) so that walrelay can be pointed at
// an existing table; the defaults are the names of the DDL that `walrelay
// schema` prints.
//
// It is public for applications and tools: the DDL and grants to put in
// migrations, the column names an existing table maps to, and the Message
// every other package speaks.
package schema
