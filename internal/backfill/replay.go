package backfill

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
)

// ReplayConfig is one run of `walrelay replay`.
type ReplayConfig struct {
	Publishing
	// Options select the rows (Since, Until, AggregateType, AggregateID,
	// Type) and say where they go (ToTopic) or that they are only counted
	// (DryRun).
	Options
}

// Replay publishes retained outbox rows again, for a consumer that
// rebuilds its state, without touching the slot. Each record carries the
// header schema.HeaderReplay, and the message's own ce_id: consumers that
// de-duplicate drop what they have. Nothing is parked: a row that cannot
// be published stops the replay.
type Replay struct {
	cfg     ReplayConfig
	started time.Time // the stamp of the header
	run     Config
}

// NewReplay checks cfg's options against now, the time the replay
// starts; it touches nothing.
func NewReplay(cfg ReplayConfig) (*Replay, error) {
	r := &Replay{cfg: cfg, started: time.Now().UTC()}
	var err error
	r.run, err = r.config()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// config is the selection and the rewrite: the replay's own header on
// every message, and --to-topic.
func (r *Replay) config() (Config, error) {
	o := r.cfg.Options
	var sel Selection
	for _, w := range []struct {
		flag, val string
		to        **time.Time
	}{{"--since", o.Since, &sel.Since}, {"--until", o.Until, &sel.Until}} {
		if w.val == "" {
			continue
		}
		t, err := ParseWhen(w.flag, w.val, r.started)
		if err != nil {
			return Config{}, err
		}
		*w.to = &t
	}
	sel.AggregateType, sel.AggregateID, sel.Type = o.AggregateType, o.AggregateID, o.Type
	if o.ToTopic != "" {
		if err := sink.ValidateTopic(o.ToTopic); err != nil {
			return Config{}, fmt.Errorf("--to-topic: %w", err)
		}
	}
	stamp := r.stamp()
	return Config{
		Decoder: r.cfg.Decoder,
		Select:  sel,
		Sink:    r.cfg.Sink,
		Rewrite: func(m *schema.Message) { markReplay(m, o.ToTopic, stamp) },
		Verb:    "replay", Progress: r.cfg.Progress,
	}, nil
}

// stamp is the value of the replay header.
func (r *Replay) stamp() string { return r.started.Format(time.RFC3339) }

// Run publishes the selected rows read through conn (or, in a dry run,
// counts them per topic) and returns what `walrelay replay` prints: the
// rows per topic, or a line saying what was replayed.
func (r *Replay) Run(ctx context.Context, conn *pgx.Conn, log *zap.Logger) (string, error) {
	if r.cfg.DryRun {
		res, err := Count(ctx, conn, r.run)
		if err != nil {
			return "", err
		}
		return dryRunReport(res), nil
	}
	if err := r.cfg.ping(ctx); err != nil {
		return "", err
	}
	log.Info("replaying outbox rows", zap.String("replay", r.stamp()), zap.String("to_topic", r.cfg.ToTopic))
	res, err := Run(ctx, conn, r.run, log)
	if err != nil {
		return "", fmt.Errorf("replay stopped after %d of %d rows: %w", res.Published, res.Selected, err)
	}
	return fmt.Sprintf("replayed %d rows in order of %s, in %s (%.0f rows/s); each carries %s=%s\n",
		res.Published, res.Order, res.Took.Round(time.Millisecond), res.Rate(), schema.HeaderReplay, r.stamp()), nil
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
func dryRunReport(res Result) string {
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
