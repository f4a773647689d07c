package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// options are walrelay's settings. Every verb accepts all of them, so one
// set of WALRELAY_* variables serves every command.
type options struct {
	PostgresURL         string
	Postgres            postgresOptions
	KafkaBrokers        string
	Table               string
	Publication         string
	Slot                string
	TopicTemplate       string
	CESource            string
	MetricsAddr         string
	LogLevel            string
	StatusInterval      time.Duration
	ConfirmInterval     time.Duration
	ShutdownTimeout     time.Duration
	KafkaLinger         time.Duration
	MaxInFlightMessages int
	MaxInFlightBytes    int
	LeaderRetry         time.Duration
	LeaderCheck         time.Duration
	LeaderLease         time.Duration
	SlotPollInterval    time.Duration
	HeartbeatInterval   time.Duration
	StallThreshold      time.Duration
	JSON                bool
	OnBadMessage        string
	DeadLetterTable     string
	MaxPayloadBytes     int
	MaxWALMessageBytes  int
	KafkaCreateTopics   bool
	KafkaRetryMin       time.Duration
	KafkaRetryMax       time.Duration
	GrantTo             string
	Columns             schema.Columns
	DLQ                 dlqOptions
	Prune               pruneOptions
	// The flags of TLS and SASL towards Kafka (kafkasec.go).
	kafkaSecurityOptions
}

// postgresOptions are the TLS and password flags that amend --postgres-url
// (see postgresConnString). Empty means unset: the URL's own setting, or
// libpq's variable (PGSSLMODE, PGPASSWORD, ...), stays in effect.
type postgresOptions struct {
	SSLMode      string
	SSLRootCert  string
	SSLCert      string
	SSLKey       string
	PasswordFile string
}

// pruneOptions are the flags of `walrelay prune`. Other verbs accept and
// ignore them.
type pruneOptions struct {
	Retention time.Duration
	Batch     int
	Pause     time.Duration
	Wait      time.Duration
	DryRun    bool
}

// dlqOptions select and filter dead letters for `walrelay dlq`. Other verbs
// accept and ignore them.
type dlqOptions struct {
	MessageID     string
	Position      string
	Aggregate     string
	AggregateType string
	Type          string
	Reason        string
	OlderThan     time.Duration
	NewerThan     time.Duration
	Status        string
	Limit         int
	All           bool
}

// flags binds options to a flag set whose defaults come from WALRELAY_*
// variables. Bad variable values are collected in errs.
type flags struct {
	fs   *flag.FlagSet
	errs []string
}

func envName(flagName string) string {
	return "WALRELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flags) str(p *string, name, def, help string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	f.fs.StringVar(p, name, def, help+" ("+envName(name)+")")
}

func (f *flags) dur(p *time.Duration, name string, def time.Duration, help string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q is not a duration (like 10s or 500ms)", envName(name), v))
		} else {
			def = d
		}
	}
	f.fs.DurationVar(p, name, def, help+" ("+envName(name)+")")
}

func (f *flags) int(p *int, name string, def int, help string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q is not a whole number", envName(name), v))
		} else {
			def = n
		}
	}
	f.fs.IntVar(p, name, def, help+" ("+envName(name)+")")
}

func (f *flags) boolean(p *bool, name string, def bool, help string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q is not true or false", envName(name), v))
		} else {
			def = b
		}
	}
	f.fs.BoolVar(p, name, def, help+" ("+envName(name)+")")
}

// parseOptions reads flags and variables for verb.
func parseOptions(verb string, args []string, stderr io.Writer) (options, error) {
	var o options
	f := &flags{fs: flag.NewFlagSet("walrelay "+verb, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.secretShown(&o.PostgresURL, "postgres-url", "PostgreSQL URL of the database holding the outbox table, e.g. postgres://user@host:5432/db?sslmode=verify-full (its password is never shown)", redactConnString)
	f.postgres(&o.Postgres)
	f.str(&o.KafkaBrokers, "kafka-brokers", "localhost:9092", "comma-separated Kafka bootstrap brokers")
	f.str(&o.Table, "table", "public.outbox_messages", "outbox table, schema-qualified")
	f.str(&o.Publication, "publication", "walrelay_outbox", "publication covering the outbox table")
	f.str(&o.Slot, "slot", "walrelay", "logical replication slot")
	f.str(&o.TopicTemplate, "topic-template", "outbox.{aggregate_type}", "Kafka topic for rows without a topic; {aggregate_type} and {type} are replaced")
	f.str(&o.CESource, "ce-source", "walrelay", "CloudEvents source (ce_source header)")
	f.str(&o.MetricsAddr, "metrics-addr", "127.0.0.1:9187", "listen address for /metrics and /healthz; empty disables")
	f.str(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	f.dur(&o.StatusInterval, "status-interval", 10*time.Second, "how often the confirmed position is sent to PostgreSQL; keep well under wal_sender_timeout")
	f.dur(&o.ConfirmInterval, "confirm-interval", 250*time.Millisecond, "how soon a newly acknowledged position is confirmed to PostgreSQL (bounds what a crash replays)")
	f.dur(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight Kafka writes may finish after SIGTERM")
	f.dur(&o.KafkaLinger, "kafka-linger", 5*time.Millisecond, "how long a partition batch waits to fill")
	f.int(&o.MaxInFlightMessages, "max-in-flight-messages", 10000, "messages handed to Kafka but not yet acknowledged, at most")
	f.int(&o.MaxInFlightBytes, "max-in-flight-bytes", 16<<20, "bytes handed to Kafka but not yet acknowledged, at most")
	f.dur(&o.LeaderRetry, "leader-retry-interval", 2*time.Second, "how often a standby tries to become the leader")
	f.dur(&o.LeaderCheck, "leader-check-interval", time.Second, "how often the leader proves its lock on PostgreSQL")
	f.dur(&o.LeaderLease, "leader-lease", 5*time.Second, "how long after its last proof the leader may still publish")
	f.dur(&o.SlotPollInterval, "slot-poll-interval", 5*time.Second, "how often the slot's figures are read from pg_replication_slots for the metrics")
	f.dur(&o.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "how often the leader writes a heartbeat into the WAL (pg_logical_emit_message) so the slot moves while the outbox is idle; 0 disables")
	f.dur(&o.StallThreshold, "stall-threshold", 2*time.Minute, "how long the WAL may move on while the confirmed position does not, with nothing in flight, before walrelay reports a stall")
	f.boolean(&o.JSON, "json", false, "status, check and dlq list: print JSON instead of a table")
	f.str(&o.OnBadMessage, "on-bad-message", "park", "what to do with a row Kafka refuses or that cannot be decoded: park (into the dead-letter table, later rows of its aggregate behind it) or halt (stop before it)")
	f.str(&o.DeadLetterTable, "dead-letter-table", "", "dead-letter table, schema-qualified (default: the outbox table's name with _dead_letters)")
	f.int(&o.MaxPayloadBytes, "max-payload-bytes", 900<<10, "largest payload walrelay sends to Kafka; a larger one is a bad message (keep it below the topics' max.message.bytes)")
	f.dur(&o.KafkaRetryMin, "kafka-retry-backoff-min", 100*time.Millisecond, "first delay before a produce is retried after a transient error; it doubles per attempt, with full jitter")
	f.dur(&o.KafkaRetryMax, "kafka-retry-backoff-max", 10*time.Second, "longest delay between produce retries (transient errors are retried for as long as it takes)")
	f.boolean(&o.KafkaCreateTopics, "kafka-create-topics", true, "ask the broker to create a missing topic (when its auto.create.topics.enable allows); false: a missing topic is a bad message")
	f.int(&o.MaxWALMessageBytes, "max-wal-message-bytes", 64<<20, "largest replication message (one row) walrelay reads; bounds the memory one huge row can take")
	f.kafkaSecurityFlags(&o.kafkaSecurityOptions)
	cols := schema.DefaultColumns()
	f.str(&o.Columns.MessageID, "column-message-id", cols.MessageID, "column holding the message id (uuid)")
	f.str(&o.Columns.AggregateType, "column-aggregate-type", cols.AggregateType, "column holding the aggregate type")
	f.str(&o.Columns.AggregateID, "column-aggregate-id", cols.AggregateID, "column holding the aggregate id (the Kafka key)")
	f.str(&o.Columns.AggregateVersion, "column-aggregate-version", cols.AggregateVersion, "column holding the aggregate version")
	f.str(&o.Columns.Type, "column-type", cols.Type, "column holding the message type")
	f.str(&o.Columns.Payload, "column-payload", cols.Payload, "column holding the payload (the Kafka value)")
	f.str(&o.Columns.Headers, "column-headers", cols.Headers, "column holding extra headers (jsonb)")
	f.str(&o.Columns.OccurredAt, "column-occurred-at", cols.OccurredAt, "column holding the event time")
	f.str(&o.Columns.Topic, "column-topic", cols.Topic, "column holding an explicit topic")
	f.str(&o.GrantTo, "grant-to", "", "schema: also print the GRANTs the role walrelay runs as needs on these tables (see docs/SECURITY.md)")
	f.dlq(&o.DLQ)
	f.prune(&o.Prune)
	if err := f.fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return o, errHelp
		}
		return o, errUsage
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "walrelay %s: unexpected argument %q\n", verb, f.fs.Arg(0))
		return o, errUsage
	}
	if len(f.errs) > 0 {
		return o, fmt.Errorf("%s", strings.Join(f.errs, "; "))
	}
	return o, nil
}

// postgres binds the TLS and password flags of the PostgreSQL connection.
// Their names and meanings are libpq's.
func (f *flags) postgres(p *postgresOptions) {
	f.str(&p.SSLMode, "postgres-sslmode", "", "PostgreSQL sslmode: disable, allow, prefer, require, verify-ca or verify-full (only verify-full checks that the server is the one named); overrides --postgres-url's")
	f.str(&p.SSLRootCert, "postgres-sslrootcert", "", "file of the CA certificates that sign the server's certificate, or system; overrides --postgres-url's")
	f.str(&p.SSLCert, "postgres-sslcert", "", "client certificate file, for the server's cert authentication; overrides --postgres-url's")
	f.str(&p.SSLKey, "postgres-sslkey", "", "private key file of --postgres-sslcert; overrides --postgres-url's")
	f.str(&p.PasswordFile, "postgres-password-file", "", "file holding the PostgreSQL password (one trailing newline is dropped); overrides --postgres-url's")
}

// dlq binds the flags of `walrelay dlq`.
func (f *flags) dlq(d *dlqOptions) {
	f.str(&d.MessageID, "message-id", "", "dlq: the parked message with this message id (a UUID)")
	f.str(&d.Position, "position", "", "dlq: the parked row at this position, LSN#SEQ as dlq list prints it (for a row without a message id)")
	f.str(&d.Aggregate, "aggregate", "", "dlq: the parked messages of one aggregate, TYPE/ID")
	f.str(&d.AggregateType, "aggregate-type", "", "dlq list: only this aggregate type")
	f.str(&d.Type, "type", "", "dlq list: only this message type")
	f.str(&d.Reason, "reason", "", "dlq list: only reasons containing this text; dlq discard: why (required, kept for audit)")
	f.dur(&d.OlderThan, "older-than", 0, "dlq list: only rows parked longer ago than this")
	f.dur(&d.NewerThan, "newer-than", 0, "dlq list: only rows parked more recently than this")
	f.str(&d.Status, "status", "parked", "dlq list: parked or discarded")
	f.int(&d.Limit, "limit", 1000, "dlq list: at most this many rows")
	f.boolean(&d.All, "all", false, "dlq retry and discard: every parked message")
}

// prune binds the flags of `walrelay prune`.
func (f *flags) prune(p *pruneOptions) {
	f.dur(&p.Retention, "retention", 0, "prune: keep outbox rows this long after their occurred_at, e.g. 168h (required, at least 1m)")
	f.int(&p.Batch, "prune-batch", 1000, "prune: rows deleted per batch, each batch its own transaction")
	f.dur(&p.Pause, "prune-pause", 100*time.Millisecond, "prune: pause between batches")
	f.dur(&p.Wait, "prune-wait", time.Minute, "prune: how long to wait for the slot to confirm the current WAL position before giving up (deleting nothing)")
	f.boolean(&p.DryRun, "dry-run", false, "prune: count the rows that would be deleted, delete nothing")
}

// schemaConfig validates the names of the outbox contract.
func (o options) schemaConfig() (schema.Config, error) {
	t, err := schema.ParseTable(o.Table)
	if err != nil {
		return schema.Config{}, err
	}
	c := schema.Config{Table: t, Publication: o.Publication, Columns: o.Columns}
	if o.DeadLetterTable != "" {
		if c.DeadLetters, err = schema.ParseTable(o.DeadLetterTable); err != nil {
			return schema.Config{}, fmt.Errorf("--dead-letter-table: %w", err)
		}
	}
	if o.OnBadMessage != "park" && o.OnBadMessage != "halt" {
		return schema.Config{}, fmt.Errorf("--on-bad-message (WALRELAY_ON_BAD_MESSAGE) is %q; want park or halt", o.OnBadMessage)
	}
	return c, c.Validate()
}

func (o options) brokers() []string {
	var out []string
	for _, b := range strings.Split(o.KafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
