package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/topics"
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
	report := reportWithFlags(checkAll(ctx, c))
	if c.Preset != "" {
		report = append(check.Report{check.Pass("preset", c.Preset)}, report...)
	}
	if c.JSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if err := report.Err(); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// checkAll composes the packages' checks: slot's PostgreSQL rules and
// dlq's dead-letter table, then sink's Kafka checks (with its TLS and SASL)
// for the topics of the outbox rows PostgreSQL gave and, when Kafka
// answers, the recorded partition counts against Kafka's, each side under
// its own timeout.
func checkAll(ctx context.Context, c config) check.Report {
	pgCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	pg, routes := slot.Check(pgCtx, c.Slot)
	pg = append(pg, checkDeadLetters(pgCtx, c.Slot, c.Schema)...)
	cancel()
	kafkaCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	kafka := sink.Check(kafkaCtx, c.Sink, routes.Messages, routes.Err)
	if kafka[0].Status != check.Fail {
		kafka = append(kafka, partitionsResult(kafkaCtx, c))
	}
	return append(check.Report(pg), kafka...)
}

// checkDeadLetters is dlq's check, the topics table's and whether the
// role may prune, on a connection of its own; nothing when the server
// cannot be reached (the PostgreSQL checks said so). Like checkAll it is
// wiring: it composes packages that know nothing of one another.
func checkDeadLetters(ctx context.Context, sc slot.Config, outbox schema.Config) []check.Result {
	conn, err := slot.Connect(ctx, sc)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return append(dlq.Check(ctx, conn, outbox.DeadLetterTable(), outbox), topics.Check(ctx, conn, outbox.TopicsTable()), retention.Check(ctx, conn, outbox.Table))
}
