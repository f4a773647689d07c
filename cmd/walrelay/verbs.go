package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// buildVersion is set at link time: -ldflags "-X main.buildVersion=v1.2.3".
var buildVersion = ""

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	bi, _ := debug.ReadBuildInfo()
	return versionFromBuildInfo(bi)
}

// parseWithLogger parses and resolves args and builds the logger they ask
// for.
func parseWithLogger(verb string, args []string, stdout, stderr io.Writer) (config, *zap.Logger, bool, error) {
	c, ok, err := parseConfig(verb, args, stdout, stderr)
	if !ok {
		return c, nil, false, err
	}
	log, err := newLogger(c.LogLevel, stderr)
	if err != nil {
		return c, nil, false, asConfigError(err)
	}
	return c, log, true, nil
}

// runSchema prints the DDL: of walrelay's own outbox table and what goes
// with it, or with --existing only what goes beside a table that exists
// (checked against the live table first when a URL is given: nothing is
// printed for a table that does not fit).
func runSchema(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, ok, err := parseConfig("schema", args, stdout, stderr)
	if !ok {
		return err
	}
	ddl, err := schemaDDL(ctx, c, stderr)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, ddl)
	return err
}

// schemaDDL is the DDL runSchema prints, with the grants of --grant-to.
func schemaDDL(ctx context.Context, c config, stderr io.Writer) (string, error) {
	sc := c.Schema
	render := schema.DDL
	if c.Existing {
		if err := checkExisting(ctx, c, stderr); err != nil {
			return "", err
		}
		render = schema.ExistingDDL
	} else if sc.Columns != schema.DefaultColumns() {
		fmt.Fprintf(stderr, "walrelay schema: this DDL creates %s with these column names; for a table that exists already, --existing prints only what walrelay needs beside it\n", sc.Table)
	}
	ddl, err := render(sc)
	if err != nil {
		return "", err
	}
	if c.GrantTo != "" {
		grants, err := schema.GrantsSQL(sc, c.GrantTo)
		if err != nil {
			return "", fmt.Errorf("--grant-to: %w", err)
		}
		ddl += "\n" + grants
	}
	return ddl, nil
}

// checkExisting judges the live table of `walrelay schema --existing` as
// init and run will (slot.CheckTable), or says on stderr that there was
// none to judge.
func checkExisting(ctx context.Context, c config, stderr io.Writer) error {
	if c.Slot.ConnString == "" {
		fmt.Fprintf(stderr, "walrelay schema: not checked against a live table (no --postgres-url): init, check and run will compare the columns of %s with the column flags\n", c.Schema.Table)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return slot.CheckTable(ctx, c.Slot)
}

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, log, ok, err := parseWithLogger("init", args, stdout, stderr)
	if !ok {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	cfg := c.Slot
	// walrelay's tables before the slot: a role that may not create them
	// must not leave a slot behind retaining WAL.
	info, err := slot.Init(ctx, cfg, log, func(ctx context.Context, conn *pgx.Conn) error { return ensureTables(ctx, conn, c) })
	if err != nil {
		return c.withEntry(err)
	}
	tables, dls := cfg.Table.String(), c.Schema.DeadLetterTable().String()
	for _, tc := range c.More {
		tables += ", " + tc.Schema.Table.String()
		dls += ", " + tc.Schema.DeadLetterTable().String()
	}
	what := "dead-letter table"
	if len(c.More) > 0 {
		what = "dead-letter tables"
	}
	fmt.Fprintf(stdout, "publication %q covers %s; slot %q is ready at %s (wal_status %s); %s %s, recoveries table %s and topics table %s are ready\n",
		cfg.Publication, tables, cfg.Slot, info.ConfirmedFlush, info.WALStatus, what, dls, c.Schema.RecoveryTable(), c.Schema.TopicsTable())
	return nil
}

// ensureTables creates the dead-letter, recoveries and topics tables,
// each unless it exists: the tables walrelay writes besides the slot.
func ensureTables(ctx context.Context, conn *pgx.Conn, c config) error {
	if err := slot.EnsureDeadLetterTable(ctx, conn, c.Schema); err != nil {
		return err
	}
	// Each further table of the config file parks into its own; the
	// recoveries and topics tables are the slot's, the first table's.
	for _, tc := range c.More {
		if err := slot.EnsureDeadLetterTable(ctx, conn, tc.Schema); err != nil {
			return err
		}
	}
	if err := slot.EnsureRecoveryTable(ctx, conn, c.Schema); err != nil {
		return err
	}
	return slot.EnsureTopicsTable(ctx, conn, c.Schema)
}
