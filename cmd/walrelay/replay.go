package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backfill"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// runReplay is `walrelay replay`: retained outbox rows published again,
// for a consumer that rebuilds its state, without touching the slot. Each
// record carries the header schema.HeaderReplay, and the message's own
// ce_id: consumers that de-duplicate drop what they have.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, log, ok, err := parseWithLogger("replay", args, stdout, stderr)
	if !ok {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	if err := warnPostgresTLS(log, c.Slot.ConnString); err != nil {
		return err
	}
	started := time.Now().UTC()
	cfg, err := replayConfig(c, started, stderr)
	if err != nil {
		return err
	}
	conn, err := slot.Connect(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if c.Backfill.DryRun {
		res, err := backfill.Count(ctx, conn, cfg)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, dryRunReport(res))
		return nil
	}
	if !discarding {
		if err := sink.Ping(ctx, c.Sink); err != nil {
			return err
		}
	}
	log.Info("replaying outbox rows", zap.String("replay", started.Format(time.RFC3339)), zap.String("to_topic", c.Backfill.ToTopic))
	res, err := backfill.Run(ctx, conn, cfg, log)
	if err != nil {
		return fmt.Errorf("replay stopped after %d of %d rows: %w", res.Published, res.Selected, err)
	}
	fmt.Fprintf(stdout, "replayed %d rows in order of %s, in %s (%.0f rows/s); each carries %s=%s\n",
		res.Published, res.Order, res.Took.Round(time.Millisecond), res.Rate(), schema.HeaderReplay, started.Format(time.RFC3339))
	return nil
}

// replayConfig is the selection and the rewrite of `walrelay replay`: its
// own header on every message, and --to-topic. Nothing is parked: a row
// that cannot be published stops the replay.
func replayConfig(c config, started time.Time, stderr io.Writer) (backfill.Config, error) {
	b := c.Backfill
	var sel backfill.Selection
	for _, w := range []struct {
		flag, val string
		to        **time.Time
	}{{"--since", b.Since, &sel.Since}, {"--until", b.Until, &sel.Until}} {
		if w.val == "" {
			continue
		}
		t, err := parseWhen(w.flag, w.val, started)
		if err != nil {
			return backfill.Config{}, err
		}
		*w.to = &t
	}
	sel.AggregateType, sel.AggregateID, sel.Type = b.AggregateType, b.AggregateID, b.Type
	if b.ToTopic != "" {
		if err := sink.ValidateTopic(b.ToTopic); err != nil {
			return backfill.Config{}, fmt.Errorf("--to-topic: %w", err)
		}
	}
	stamp := started.Format(time.RFC3339)
	return backfill.Config{
		Decoder: c.Decoder,
		Select:  sel,
		Sink:    c.Sink,
		Rewrite: func(m *schema.Message) { markReplay(m, b.ToTopic, stamp) },
		Verb:    "replay", Progress: stderr,
	}, nil
}

// markReplay adds the replay header, in place of any of the row's own
// headers by that name, and sends m to topic when one is given.
func markReplay(m *schema.Message, topic, stamp string) {
	hs := m.Headers[:0:0]
	for _, h := range m.Headers {
		if !strings.EqualFold(h.Key, schema.HeaderReplay) {
			hs = append(hs, h)
		}
	}
	m.Headers = append(hs, schema.Header{Key: schema.HeaderReplay, Value: stamp})
	if topic != "" {
		m.Topic = topic
	}
}

// dryRunReport is the rows per topic a replay would publish.
func dryRunReport(res backfill.Result) string {
	topics := make([]string, 0, len(res.ByTopic))
	for t := range res.ByTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var b strings.Builder
	fmt.Fprintf(&b, "would replay %d rows (dry run: nothing published), in order of %s\n", res.Selected, res.Order)
	for _, t := range topics {
		name := t
		if t == "" {
			name = "(rows that cannot be decoded: the replay would stop at the first)"
		}
		fmt.Fprintf(&b, "  %8d  %s\n", res.ByTopic[t], name)
	}
	return b.String()
}
