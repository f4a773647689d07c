package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/check"
	"github.com/walrelay/walrelay/dlq"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// checkTimeout bounds each side of `walrelay check`, PostgreSQL and Kafka,
// so that an unreachable host fails the check instead of hanging it.
const checkTimeout = 15 * time.Second

// runCheck prints what walrelay needs of PostgreSQL and Kafka, check by
// check, as a table or (--json) as JSON. Any failed check makes the error
// that exits with code 1; warnings alone do not.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, ok, err := parseConfig("check", args, stdout, stderr)
	if !ok {
		return err
	}
	report := checkAll(ctx, c)
	if c.JSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if n := report.Count(check.Fail); n > 0 {
		return fmt.Errorf("check: %d %s failed", n, plural(n, "check", "checks"))
	}
	return nil
}

// checkAll runs the PostgreSQL checks, then the Kafka checks (with its TLS
// and SASL) with the topics of the outbox rows PostgreSQL gave, each side
// under its own timeout.
func checkAll(ctx context.Context, c config) check.Report {
	pgCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	pg, routes := slot.Check(pgCtx, c.Slot, c.Schema.Columns)
	pg = append(pg, checkDeadLetters(pgCtx, c.Slot, c.Schema.DeadLetterTable())...)
	cancel()
	kafkaCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	kafka := sink.Check(kafkaCtx, c.Sink, routes.Messages, routes.Err)
	return append(check.Report(pg), kafka...)
}

// checkDeadLetters reports whether the dead-letter table exists; nothing
// when the server cannot be reached (the PostgreSQL checks said so).
func checkDeadLetters(ctx context.Context, sc slot.Config, table schema.Table) []check.Result {
	conn, err := slot.Connect(ctx, sc)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	store, err := dlq.New(conn, table)
	if err != nil {
		return []check.Result{check.Failure("dead-letter table", err.Error(), "Set --dead-letter-table to a valid table name.")}
	}
	if err := store.Ready(ctx); err != nil {
		return []check.Result{check.Failure("dead-letter table", err.Error(), "Run `walrelay init`, which creates it, or apply the DDL of `walrelay schema`.")}
	}
	res := []check.Result{check.Pass("dead-letter table", store.Table()+" exists")}
	missing, err := store.MissingPrivileges(ctx)
	switch {
	case err != nil:
		res = append(res, check.Failure("dead-letter privileges", err.Error(), "Check that the role may read the catalog."))
	case len(missing) > 0:
		res = append(res, check.Failure("dead-letter privileges",
			fmt.Sprintf("the role lacks %s on %s (parking and `walrelay dlq` need SELECT, INSERT, UPDATE and DELETE)", strings.Join(missing, ", "), store.Table()),
			fmt.Sprintf("Have the table's owner run: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO <role> (or apply `walrelay schema --grant-to <role>`).", store.Table())))
	default:
		res = append(res, check.Pass("dead-letter privileges", "SELECT, INSERT, UPDATE, DELETE"))
	}
	return res
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
