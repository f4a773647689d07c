package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/internal/topics"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

const topicsUsage = `Usage:
  walrelay topics list   [flags]   each topic walrelay published to: the partition count its keys are
                                   routed by, and Kafka's now (a difference holds the topic)
  walrelay topics accept --topic T [--reason R] [flags]
                                   record Kafka's partition count of T as the one its keys are routed
                                   by; a running walrelay resumes publishing to T at its next
                                   partition check (--partition-check-interval, 15s by default)

Run 'walrelay topics list -h' or 'walrelay topics accept -h' for the flags.
Before accepting a grown topic, let its consumers catch up on what walrelay published
to it before the change: see docs/RUNBOOK.md, WalrelayTopicPartitionsChanged.
`

// topicsTimeout bounds `walrelay topics`, PostgreSQL and Kafka together.
const topicsTimeout = 30 * time.Second

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topicsUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list", "accept":
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, topicsUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "walrelay topics: unknown command %q\n\n%s", sub, topicsUsage)
		return errUsage
	}
	o, s, err := parseOptions("topics "+sub, rest, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if sub == "accept" && strings.TrimSpace(o.Topics.Topic) == "" {
		fmt.Fprint(stderr, "walrelay topics accept: --topic is required\nRun 'walrelay topics accept -h' for its flags.\n")
		return errUsage
	}
	c, err := o.resolve(s)
	if err == nil && sub == "accept" {
		if terr := sink.ValidateTopic(c.Topics.Topic); terr != nil {
			err = fmt.Errorf("--topic %q: %w", c.Topics.Topic, terr)
		}
	}
	if err != nil {
		return asConfigError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, topicsTimeout)
	defer cancel()
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := topics.Open(ctx, conn, c.Schema.TopicsTable())
	if err != nil {
		return err
	}
	if sub == "accept" {
		return topics.AcceptFromKafka(ctx, st, c.Sink, c.Topics.Topic, c.Topics.Reason, stdout)
	}
	return topics.WriteList(ctx, st, c.Sink, stdout, c.JSON)
}

// partitionsResult is check's line on the recorded partition counts
// (topics.CheckPartitions).
func partitionsResult(ctx context.Context, c config) check.Result {
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return check.Warning(topics.PartitionsCheck, "not read: "+oneLine(err).Error(), "See the PostgreSQL checks above.")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return topics.CheckPartitions(ctx, conn, c.Schema.TopicsTable(), c.Sink)
}
