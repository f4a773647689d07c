package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// errHelp is returned by parseOptions after -h printed the flags.
var errHelp = errors.New("help")

// buildVersion is set at link time: -ldflags "-X main.buildVersion=v1.2.3".
var buildVersion = ""

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// options parses args and turns -h into a clean exit.
func parse(verb string, args []string, stderr io.Writer) (options, bool, error) {
	o, err := parseOptions(verb, args, stderr)
	if errors.Is(err, errHelp) {
		return o, false, nil
	}
	return o, err == nil, err
}

// parseWithLogger parses args and builds the logger they ask for.
func parseWithLogger(verb string, args []string, stderr io.Writer) (options, *zap.Logger, bool, error) {
	o, ok, err := parse(verb, args, stderr)
	if !ok {
		return o, nil, false, err
	}
	log, err := newLogger(o.LogLevel, stderr)
	if err != nil {
		return o, nil, false, err
	}
	return o, log, true, nil
}

func runSchema(args []string, stdout, stderr io.Writer) error {
	o, ok, err := parse("schema", args, stderr)
	if !ok {
		return err
	}
	sc, err := o.schemaConfig()
	if err != nil {
		return err
	}
	ddl, err := schema.DDL(sc)
	if err != nil {
		return err
	}
	if o.GrantTo != "" {
		grants, err := schema.GrantsSQL(sc, o.GrantTo)
		if err != nil {
			return fmt.Errorf("--grant-to: %w", err)
		}
		ddl += "\n" + grants
	}
	_, err = io.WriteString(stdout, ddl)
	return err
}

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, log, ok, err := parseWithLogger("init", args, stderr)
	if !ok {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	cfg, err := o.slotConfig()
	if err != nil {
		return err
	}
	info, err := slot.Init(ctx, cfg, log)
	if err != nil {
		return err
	}
	dl, err := ensureDeadLetters(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "publication %q covers %s; slot %q is ready at %s (wal_status %s); dead-letter table %s is ready\n",
		cfg.Publication, cfg.Table, cfg.Slot, info.ConfirmedFlush, info.WALStatus, dl)
	return nil
}

func (o options) slotConfig() (slot.Config, error) {
	sc, err := o.schemaConfig()
	if err != nil {
		return slot.Config{}, err
	}
	conn, err := o.postgresConnString()
	if err != nil {
		return slot.Config{}, err
	}
	return slot.Config{
		ConnString:      conn,
		Slot:            o.Slot,
		Publication:     sc.Publication,
		Table:           sc.Table,
		StatusInterval:  o.StatusInterval,
		ConfirmInterval: o.ConfirmInterval,
		MaxMessageBytes: o.MaxWALMessageBytes,
	}, nil
}
