package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/walrelay/walrelay/internal/status"
)

// runStatus prints the slot, its lag, the publication and the leader, as a
// table or as JSON. A missing slot or publication is a reading (exit 0); a
// server it cannot read is an error (exit 1).
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, ok, err := parseConfig("status", args, stdout, stderr)
	if !ok {
		return err
	}
	r, err := status.Read(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	if c.JSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if err := r.Problem(); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// oneLine folds a multi-line error (pgconn lists one line per address it
// tried) into the single line main prints.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	var b strings.Builder
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), ":") {
			b.WriteString(";")
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(line)
	}
	return fmt.Errorf("%s", b.String())
}
