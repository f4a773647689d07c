package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/backfill"
	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/kafkasec"
	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// options are what a verb's flags set. The tunables are fields of the
// packages' own configurations, which start at those packages' defaults;
// the rest are what the command line says as written (a URL, a table name,
// file names), which resolve turns into configurations once.
type options struct {
	PostgresURL     string
	ReplicationURL  string
	Postgres        slot.ConnParams // the flags that amend --postgres-url
	KafkaBrokers    string
	Table           string
	Publication     string
	DeadLetterTable string
	Columns         schema.Columns
	// AggregateTypeDefault is --aggregate-type-default
	// (decoder.Config.AggregateTypeDefault).
	AggregateTypeDefault string
	ContentType          string // --content-type
	NullPayload          string // --null-payload
	// SpanContextColumn is --column-tracing-span-context
	// (decoder.Config.SpanContextColumn).
	SpanContextColumn string
	// ContentTypeColumn is --column-content-type
	// (decoder.Config.ContentTypeColumn).
	ContentTypeColumn string
	// Preset is --preset: its flag values are applied when the flags are
	// parsed (preset.go); resolve keeps its name for check.
	Preset     string
	ConfigFile string // --config: read before the flags are parsed (configfile.go)
	// MoreTables are the options of the config file's further tables,
	// each parsed as this one from its own entry: only their table-level
	// fields (tableKey) differ from these.
	MoreTables []options
	// Entry is where the table's entry stands in the config file
	// ("walrelay.yaml:12"), for errors about the table; "" without one.
	Entry string
	// Existing is `walrelay schema --existing`: the DDL beside an outbox
	// table that exists already.
	Existing     bool
	GrantTo      string
	OnBadMessage string
	CreateTopics bool // --kafka-create-topics: sink.Config says it the other way round
	Idempotence  bool // --kafka-idempotence: likewise
	Compression  string
	MetricsAddr  string
	LogLevel     string
	JSON         bool

	Slot      slot.Config        // Slot, StatusInterval, ConfirmInterval, MaxMessageBytes
	Monitor   slot.MonitorConfig // PollInterval, HeartbeatInterval, StallThreshold
	Leader    leader.Config      // RetryInterval, CheckInterval, LeaseTimeout
	Relay     relay.Config       // ShutdownTimeout
	Sink      sink.Config        // TopicTemplate, Source, Linger, in-flight and payload bounds, retry backoff
	Retention retention.Config   // Retention, Batch, Pause, Wait, DryRun

	// DLQ selects and filters dead letters for `walrelay dlq`.
	DLQ dlq.Options
	// Topics is what `walrelay topics accept` acts on.
	Topics topicsOptions
	// Backfill selects the rows of `walrelay recover` and `walrelay replay`.
	Backfill backfillOptions
	// KafkaSecurity are the flags of TLS and SASL towards Kafka (kafkasec.go).
	KafkaSecurity kafkasec.Config
}

// topicsOptions say which topic `walrelay topics accept` records the
// partition count of, and why.
type topicsOptions struct {
	Topic, Reason string
}

// backfillOptions are what `walrelay recover` and `walrelay replay` read
// from the outbox table (package backfill turns them into a selection).
type backfillOptions = backfill.Options

// defaultMargin is how far before --since `walrelay recover` reads, for
// the transactions that started before it and committed after.
const defaultMargin = time.Hour

const resumeHelp = "after a start or a failover, read each partition's newest records in Kafka first and acknowledge without publishing the replayed messages already there (walrelay_resume_skipped_messages_total; needs READ on the topics); false publishes every replayed message again, for the consumers' inbox to drop"

// defaultHeartbeat is how often `walrelay run` writes a heartbeat into the
// WAL unless told otherwise; the package's zero writes none.
const defaultHeartbeat = 10 * time.Second

// defaultOptions are the options before any flag or variable: each
// package's defaults, and the command line's own for the rest.
func defaultOptions() options {
	sc := schema.DefaultConfig()
	sk := sink.Defaults()
	mon := slot.MonitorDefaults()
	mon.HeartbeatInterval = defaultHeartbeat
	// A restart skips what Kafka already has (DECISIONS 47): the fault
	// suite and the failover tests lose nothing with it, and publish no
	// duplicate after a relay crash or a leader change.
	sk.ResumeFromKafka = true
	return options{
		KafkaBrokers: "localhost:9092",
		Table:        sc.Table.String(),
		Publication:  sc.Publication,
		Columns:      sc.Columns,
		NullPayload:  string(decoder.NullPayloadPark),
		OnBadMessage: "park",
		CreateTopics: !sk.NoCreateTopics,
		Idempotence:  !sk.NoIdempotence,
		Compression:  "none",
		MetricsAddr:  "127.0.0.1:9187",
		LogLevel:     "info",
		Slot:         slot.Defaults(),
		Monitor:      mon,
		Leader:       leader.Defaults(),
		Relay:        relay.Defaults(),
		Sink:         sk,
		Retention:    retention.Defaults(),
		DLQ:          dlq.Options{Status: "parked", Limit: 1000},
		Backfill:     backfillOptions{Margin: defaultMargin},
	}
}

// The verbs and their flags, by group. A verb has a flag only where it
// uses it.
var verbFlags = map[string]func(s *flagSet, o *options){
	"schema": func(s *flagSet, o *options) {
		presetFlag(s, o)
		s.Group("Existing table")
		s.Bool(&o.Existing, "existing", "print only what walrelay needs beside an outbox table that exists already (the publication, walrelay's own tables, the grants): no CREATE TABLE or index for it; with --postgres-url the table and its columns are checked first, and nothing is printed when they do not fit")
		s.Secret(&o.PostgresURL, "postgres-url", "with --existing: PostgreSQL URL of the database holding the outbox table, whose columns are checked against the column flags before the DDL is printed (its password is never shown); ignored without --existing", slot.RedactConnString)
		connParamFlags(s, o)
		outboxFlags(s, o, true)
		columnFlags(s, o, true)
		s.Group("Privileges")
		s.Str(&o.GrantTo, "grant-to", "also print the GRANTs the role walrelay runs as needs on these tables (see docs/SECURITY.md)")
	},
	"init": func(s *flagSet, o *options) {
		presetFlag(s, o)
		postgresFlags(s, o)
		outboxFlags(s, o, true)
		columnFlags(s, o, true)
		slotFlag(s, o)
		logFlag(s, o)
	},
	"check": func(s *flagSet, o *options) {
		streamFlags(s, o)
		jsonFlag(s, o, "print JSON instead of a table")
	},
	"status": func(s *flagSet, o *options) {
		postgresFlags(s, o)
		outboxFlags(s, o, true) // the recoveries table is in the dead-letter table's schema
		slotFlag(s, o)
		jsonFlag(s, o, "print JSON instead of a table")
	},
	"run": func(s *flagSet, o *options) {
		streamFlags(s, o)
		producerFlags(s, o)
		relayFlags(s, o)
		leaderFlags(s, o)
		s.Group("Operations")
		s.Str(&o.MetricsAddr, "metrics-addr", "listen address for /metrics, /healthz and /readyz; empty disables")
		s.Str(&o.LogLevel, "log-level", "debug, info, warn or error")
	},
	"dlq list": func(s *flagSet, o *options) {
		postgresFlags(s, o)
		deadLetterFlags(s, o)
		s.Group("Which dead letters")
		s.Str(&o.DLQ.Aggregate, "aggregate", "only the messages of one aggregate, TYPE/ID")
		s.Str(&o.DLQ.AggregateType, "aggregate-type", "only this aggregate type")
		s.Str(&o.DLQ.Type, "type", "only this message type")
		s.Str(&o.DLQ.Reason, "reason", "only reasons containing this text")
		s.Dur(&o.DLQ.OlderThan, "older-than", "only rows parked longer ago than this")
		s.Dur(&o.DLQ.NewerThan, "newer-than", "only rows parked more recently than this")
		s.Str(&o.DLQ.Status, "status", "parked or discarded")
		s.Int(&o.DLQ.Limit, "limit", "at most this many rows")
		s.FlagOnly("aggregate", "aggregate-type", "type", "reason", "older-than", "newer-than", "status", "limit")
		jsonFlag(s, o, "print JSON instead of a table")
	},
	"dlq retry": func(s *flagSet, o *options) {
		presetFlag(s, o)
		postgresFlags(s, o)
		deadLetterFlags(s, o)
		kafkaFlags(s, o)
		topicFlags(s, o)
		producerFlags(s, o)
		selectorFlags(s, o)
		logFlag(s, o)
	},
	"dlq discard": func(s *flagSet, o *options) {
		postgresFlags(s, o)
		deadLetterFlags(s, o)
		selectorFlags(s, o)
		s.Group("Audit")
		s.Str(&o.DLQ.Reason, "reason", "why they are given up (required, kept with them for audit)")
		s.FlagOnly("reason")
	},
	"recover": func(s *flagSet, o *options) {
		streamFlags(s, o)
		producerFlags(s, o)
		s.Group("Bad messages")
		s.Str(&o.OnBadMessage, "on-bad-message", onBadMessageHelp)
		s.Bool(&o.Sink.ResumeFromKafka, "resume-from-kafka", resumeHelp)
		leaderFlags(s, o)
		s.Group("What to recover (exactly one of --since, --since-message-id, --all)")
		s.Str(&o.Backfill.Since, "since", "publish the rows that occurred from this time on: RFC 3339 (2026-12-04T08:00:00Z), or a duration meaning that long ago (90m); the last time walrelay confirmed, as its stop line or walrelay_confirmed_lsn tells")
		s.Str(&o.Backfill.SinceMessageID, "since-message-id", "publish the rows that occurred from this message's occurred_at on (the message id of a row still in the table)")
		s.Bool(&o.Backfill.All, "all", "publish every row in the outbox table")
		s.Dur(&o.Backfill.Margin, "margin", "also read this long before --since: occurred_at is when a row's transaction started, and one that committed later may be in the gap")
		s.Str(&o.Backfill.Force, "force", "replace a slot that is still usable, for this reason (kept in the recoveries table); without it walrelay recovers only a lost or missing slot")
		s.FlagOnly("since", "since-message-id", "all", "force")
		logFlag(s, o)
	},
	"replay": func(s *flagSet, o *options) {
		presetFlag(s, o)
		postgresFlags(s, o)
		s.Group("Outbox")
		s.Str(&o.Table, "table", tableHelp)
		columnFlags(s, o, true)
		payloadFlags(s, o)
		kafkaFlags(s, o)
		topicFlags(s, o)
		producerFlags(s, o)
		s.Group("Which rows (every row still in the table when none is given)")
		s.Str(&o.Backfill.Since, "since", "rows that occurred at or after this time: RFC 3339, or a duration meaning that long ago")
		s.Str(&o.Backfill.Until, "until", "rows that occurred before this time: RFC 3339, or a duration meaning that long ago")
		s.Str(&o.Backfill.AggregateType, "aggregate-type", "only this aggregate type")
		s.Str(&o.Backfill.AggregateID, "aggregate-id", "only this aggregate id")
		s.Str(&o.Backfill.Type, "type", "only this message type")
		s.Group("Where")
		s.Str(&o.Backfill.ToTopic, "to-topic", "publish every row to this topic instead of its own")
		s.Bool(&o.Backfill.DryRun, "dry-run", "count the rows per topic, publish nothing")
		s.FlagOnly("since", "until", "aggregate-type", "aggregate-id", "type", "to-topic", "dry-run")
		logFlag(s, o)
	},
	"topics list": func(s *flagSet, o *options) {
		postgresFlags(s, o)
		topicsTableFlags(s, o)
		kafkaFlags(s, o)
		jsonFlag(s, o, "print JSON instead of a table")
	},
	"topics accept": func(s *flagSet, o *options) {
		postgresFlags(s, o)
		topicsTableFlags(s, o)
		kafkaFlags(s, o)
		s.Group("Which topic")
		s.Str(&o.Topics.Topic, "topic", "the topic whose partition count in Kafka now becomes the one its keys are routed by (required)")
		s.Str(&o.Topics.Reason, "reason", "why, kept in the topics table for audit")
		s.FlagOnly("topic", "reason")
	},
	"prune": func(s *flagSet, o *options) {
		postgresFlags(s, o)
		s.Group("Outbox table")
		s.Str(&o.Table, "table", tableHelp)
		s.Str(&o.Columns.OccurredAt, "column-occurred-at", "column holding the event time, which --retention counts from")
		s.Str(&o.DeadLetterTable, "dead-letter-table", deadLetterTableHelp+"; prune keeps what a pending recovery needs, from the recoveries table in its schema")
		slotFlag(s, o)
		s.Group("Pruning")
		s.Dur(&o.Retention.Retention, "retention", "keep outbox rows this long after their occurred_at, e.g. 168h (required, at least 1m)")
		s.Int(&o.Retention.Batch, "prune-batch", "rows deleted per batch, each batch its own transaction")
		s.Dur(&o.Retention.Pause, "prune-pause", "pause between batches; 0 for none")
		s.Dur(&o.Retention.Wait, "prune-wait", "how long to wait for the slot to confirm the current WAL position before giving up (deleting nothing); 0 for not at all")
		s.Bool(&o.Retention.DryRun, "dry-run", "count the rows that would be deleted, delete nothing")
		s.Bool(&o.Retention.DropPartitions, "drop-partitions", "a table partitioned by RANGE on its occurred_at column: drop the partitions whose whole range is older than --retention once their rows are published (DETACH PARTITION CONCURRENTLY, DROP TABLE; as the table's owner), delete the other old rows")
		// What is deleted is said on the command line, never by a
		// variable left in the environment.
		s.FlagOnly("retention", "dry-run", "drop-partitions")
		logFlag(s, o)
	},
}

// verbNames are the verbs with flags, sorted.
func verbNames() []string {
	return []string{"check", "dlq discard", "dlq list", "dlq retry", "init", "prune", "recover", "replay", "run", "schema", "status", "topics accept", "topics list"}
}

// bindVerb binds the flags of verb to o.
func bindVerb(verb string, s *flagSet, o *options) {
	verbFlags[verb](s, o)
	configFlag(s, o)
}

// parseOptions reads the variables and the command line of verb: errHelp
// after -h, errUsage after a usage error (both printed).
func parseOptions(verb string, args []string, stdout, stderr io.Writer) (options, *flagSet, error) {
	o := defaultOptions()
	s := newFlagSet("walrelay " + verb)
	bindVerb(verb, s, &o)
	var cf *configFile
	if path := configPath(args); path != "" {
		var err error
		if cf, err = readConfigFile(verb, path, args); err != nil {
			return o, s, asConfigError(err)
		}
		s.SetFile(cf.source(0))
		o.Entry = cf.entry(0)
	}
	err := s.Parse(args, lookupEnv, stdout, stderr)
	if errors.Is(err, errHelp) {
		return o, s, err
	}
	if err != nil {
		return o, s, asConfigError(err) // a bad variable or file value is a settings error too
	}
	// The file's further tables: each parsed as the first, from its own
	// entry (readConfigFile refused table-level flags and variables).
	for i := 1; cf != nil && i < len(cf.tables); i++ {
		more := defaultOptions()
		ms := newFlagSet("walrelay " + verb)
		bindVerb(verb, ms, &more)
		ms.SetFile(cf.source(i))
		if err := ms.Parse(args, lookupEnv, io.Discard, io.Discard); err != nil {
			return o, s, asConfigError(err)
		}
		more.Entry = cf.entry(i)
		o.MoreTables = append(o.MoreTables, more)
	}
	return o, s, nil
}

// streamFlags are what the verbs that read the outbox from the slot and
// publish it (run, recover, and check, which judges both ends) share: the
// table, its rows, the slot and Kafka.
func streamFlags(s *flagSet, o *options) {
	presetFlag(s, o)
	postgresFlags(s, o)
	outboxFlags(s, o, true)
	columnFlags(s, o, true)
	payloadFlags(s, o)
	slotFlag(s, o)
	kafkaFlags(s, o)
	topicFlags(s, o)
}

func postgresFlags(s *flagSet, o *options) {
	s.Group("PostgreSQL connection")
	s.Secret(&o.PostgresURL, "postgres-url", "PostgreSQL URL of the database holding the outbox table, e.g. postgres://user@host:5432/db?sslmode=verify-full (its password is never shown)", slot.RedactConnString)
	s.Secret(&o.ReplicationURL, "replication-url", "PostgreSQL URL of the same database's direct endpoint, for the replication stream, the slot and the leader's lock, when --postgres-url goes through a transaction pooler (PgBouncer, Supavisor, Neon's -pooler host); defaults to --postgres-url", slot.RedactConnString)
	connParamFlags(s, o)
}

// connParamFlags amend --postgres-url (slot.ConnParams).
func connParamFlags(s *flagSet, o *options) {
	p := &o.Postgres
	s.Str(&p.SSLMode, "postgres-sslmode", "sslmode: disable, allow, prefer, require, verify-ca or verify-full (only verify-full checks that the server is the one named); overrides the URL's")
	s.Str(&p.SSLRootCert, "postgres-sslrootcert", "file of the CA certificates that sign the server's certificate, or system; overrides the URL's")
	s.Str(&p.SSLCert, "postgres-sslcert", "client certificate file, for the server's cert authentication; overrides the URL's")
	s.Str(&p.SSLKey, "postgres-sslkey", "private key file of --postgres-sslcert; overrides the URL's")
	s.Str(&p.PasswordFile, "postgres-password-file", "file holding the password (one trailing newline is dropped); overrides the URL's")
}

// outboxFlags are the names of the outbox contract; status reads no
// dead-letter table.
func outboxFlags(s *flagSet, o *options, deadLetters bool) {
	s.Group("Outbox")
	s.Str(&o.Table, "table", tableHelp)
	s.Str(&o.Publication, "publication", "publication covering the outbox table")
	if deadLetters {
		s.Str(&o.DeadLetterTable, "dead-letter-table", deadLetterTableHelp)
	}
}

// The help of the flags several groups bind.
const (
	tableHelp           = `outbox table, schema-qualified; names are case-sensitive, a part in double quotes when it holds a dot or a quote ("my.schema"."Outbox Events")`
	deadLetterTableHelp = "dead-letter table, schema-qualified like --table (default: the outbox table's name with _dead_letters)"
	onBadMessageHelp    = "what to do with a row Kafka refuses or that cannot be decoded: park (into the dead-letter table, later rows of its aggregate behind it) or halt (stop before it)"
)

// deadLetterFlags name the dead-letter table, by itself or from the outbox
// table's name.
func deadLetterFlags(s *flagSet, o *options) {
	s.Group("Dead-letter table")
	s.Str(&o.Table, "table", tableHelp)
	s.Str(&o.DeadLetterTable, "dead-letter-table", deadLetterTableHelp)
}

// topicsTableFlags name the topics table, from the outbox table's name,
// beside the dead-letter table.
func topicsTableFlags(s *flagSet, o *options) {
	s.Group("Topics table (the outbox table's name with _topics, beside the dead-letter table)")
	s.Str(&o.Table, "table", tableHelp)
	s.Str(&o.DeadLetterTable, "dead-letter-table", deadLetterTableHelp)
}

// columnFlags name the outbox table's columns; with decoding, also how its
// rows are read (the verbs that decode rows or judge the table; `schema`
// only prints DDL).
func columnFlags(s *flagSet, o *options, decoding bool) {
	s.Group("Outbox columns (for an existing table with other names)")
	c := &o.Columns
	s.Str(&c.MessageID, "column-message-id", "column holding the message id (uuid, bigint, integer or text: the record's ce_id)")
	s.Str(&c.AggregateType, "column-aggregate-type", "column holding the aggregate type")
	s.Str(&c.AggregateID, "column-aggregate-id", "column holding the aggregate id (the Kafka key)")
	s.Str(&c.AggregateVersion, "column-aggregate-version", "column holding the aggregate version")
	s.Str(&c.Type, "column-type", "column holding the message type")
	s.Str(&c.Payload, "column-payload", "column holding the payload (the Kafka value)")
	s.Str(&c.Headers, "column-headers", "column holding extra headers (jsonb)")
	s.Str(&c.OccurredAt, "column-occurred-at", "column holding the event time")
	s.Str(&c.Topic, "column-topic", "column holding an explicit topic")
	if !decoding {
		return
	}
	s.Str(&o.AggregateTypeDefault, "aggregate-type-default", "aggregate type of every row when the table has no aggregate type column, and of a row whose aggregate type is NULL (topic template, aggregate_type header, ordering); empty: the column is required")
	s.Str(&o.ContentTypeColumn, "column-content-type", "column holding each row's content-type header (text, e.g. application/avro), for a table of payloads of several types; a NULL or empty value gets --content-type, else the payload column type's; optional, empty for none")
	s.Str(&o.SpanContextColumn, "column-tracing-span-context", "column holding a span context as Debezium stores it (Java Properties text): a valid W3C traceparent in it becomes the traceparent header, with tracestate; optional, empty for none")
}

// payloadFlags say how a row's payload becomes the record's value, in the
// group of the column flags they follow: for the verbs that publish rows
// (and check, which judges them).
func payloadFlags(s *flagSet, o *options) {
	s.Str(&o.ContentType, "content-type", "content-type header of every record instead of the payload column type's (json, jsonb: application/json; text, varchar: text/plain; charset=utf-8; bytea: application/octet-stream), e.g. application/json for JSON in a text column")
	s.Str(&o.NullPayload, "null-payload", "what a row with a NULL payload becomes: park (a bad row, as one that cannot be decoded) or tombstone (a Kafka record with a null value, for compacted topics)")
}

func slotFlag(s *flagSet, o *options) {
	s.Group("Replication slot")
	s.Str(&o.Slot.Slot, "slot", "logical replication slot")
}

func kafkaFlags(s *flagSet, o *options) {
	s.Group("Kafka connection")
	s.Str(&o.KafkaBrokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers")
	kafkaSecurityFlags(s, &o.KafkaSecurity)
}

func topicFlags(s *flagSet, o *options) {
	s.Group("Topics")
	s.Str(&o.Sink.TopicTemplate, "topic-template", "Kafka topic for rows without a topic; {aggregate_type} and {type} are replaced")
	s.Bool(&o.CreateTopics, "kafka-create-topics", "ask the broker to create a missing topic (when its auto.create.topics.enable allows); false: a missing topic is a bad message")
}

func producerFlags(s *flagSet, o *options) {
	s.Group("Kafka producer")
	k := &o.Sink
	s.Str(&k.Source, "ce-source", "CloudEvents source (ce_source header)")
	s.Str(&k.MessageIDHeader, "message-id-header", "also put the message id into a header of this name, beside ce_id (Debezium's consumers read it from id); empty for none")
	s.Dur(&k.Linger, "kafka-linger", "how long a partition batch waits to fill; up to ten times longer for messages already late (a backlog draining)")
	s.Str(&o.Compression, "kafka-compression", "codec of the record batches: none, gzip, snappy, lz4 or zstd (the consumers must read it; BENCHMARKS.md says what each costs and saves)")
	s.Bool(&o.Idempotence, "kafka-idempotence", "Kafka's idempotent producer: each batch carries a producer id and sequence, so a broker drops a batch sent again after a lost answer (no duplicates after broker faults); brokers that refuse it turn it off with a warning")
	s.Int(&k.MaxInFlightMessages, "max-in-flight-messages", "messages handed to Kafka but not yet acknowledged, at most")
	s.Int(&k.MaxInFlightBytes, "max-in-flight-bytes", "bytes handed to Kafka but not yet acknowledged, at most")
	s.Int(&k.MaxPayloadBytes, "max-payload-bytes", "largest payload walrelay sends to Kafka; a larger one is a bad message (keep it below the topics' max.message.bytes)")
	s.Dur(&k.RetryBackoffMin, "kafka-retry-backoff-min", "first delay before a produce is retried after a transient error; it doubles per attempt, with full jitter")
	s.Dur(&k.RetryBackoffMax, "kafka-retry-backoff-max", "longest delay between produce retries (transient errors are retried for as long as it takes)")
	s.Dur(&k.PartitionRecheck, "partition-check-interval", "how often the partition count of each topic in use is read again from Kafka: a topic whose count changed gets nothing more until walrelay topics accept records the new count")
}

func relayFlags(s *flagSet, o *options) {
	s.Group("Relay")
	s.Dur(&o.Slot.StatusInterval, "status-interval", "how often the confirmed position is sent to PostgreSQL; keep well under wal_sender_timeout")
	s.Dur(&o.Slot.ConfirmInterval, "confirm-interval", "how soon a newly acknowledged position is confirmed to PostgreSQL (bounds what a crash replays)")
	s.Int(&o.Slot.MaxMessageBytes, "max-wal-message-bytes", "largest replication message (one row) walrelay reads; bounds the memory one huge row can take")
	s.Str(&o.OnBadMessage, "on-bad-message", onBadMessageHelp)
	s.Bool(&o.Sink.ResumeFromKafka, "resume-from-kafka", resumeHelp)
	s.Dur(&o.Relay.ShutdownTimeout, "shutdown-timeout", "how long in-flight Kafka writes may finish after SIGTERM")
	s.Dur(&o.Monitor.HeartbeatInterval, "heartbeat-interval", "how often the leader writes a heartbeat into the WAL (pg_logical_emit_message) so the slot moves while the outbox is idle; 0 disables")
	s.Dur(&o.Monitor.PollInterval, "slot-poll-interval", "how often the slot's figures are read from pg_replication_slots for the metrics")
	s.Dur(&o.Monitor.StallThreshold, "stall-threshold", "how long the WAL may move on while the confirmed position does not, with nothing in flight, before walrelay reports a stall")
}

func leaderFlags(s *flagSet, o *options) {
	s.Group("Leadership (one walrelay publishes per slot; the others wait)")
	s.Dur(&o.Leader.RetryInterval, "leader-retry-interval", "how often a standby tries to become the leader")
	s.Dur(&o.Leader.CheckInterval, "leader-check-interval", "how often the leader proves its lock on PostgreSQL")
	s.Dur(&o.Leader.LeaseTimeout, "leader-lease", "how long after its last proof the leader may still publish")
}

// selectorFlags say which parked messages retry or discard act on. They
// are flag-only: a variable left in the environment must never widen what
// a destructive command touches.
func selectorFlags(s *flagSet, o *options) {
	s.Group("Which parked messages (exactly one)")
	s.Str(&o.DLQ.MessageID, "message-id", "the parked message with this message id")
	s.Str(&o.DLQ.Position, "position", "the parked row at this position, LSN#SEQ as dlq list prints it (for a row without a message id)")
	s.Str(&o.DLQ.Aggregate, "aggregate", "the parked messages of one aggregate, TYPE/ID")
	s.Bool(&o.DLQ.All, "all", "every parked message")
	s.FlagOnly("message-id", "position", "aggregate", "all")
}

func logFlag(s *flagSet, o *options) {
	s.Group("Operations")
	s.Str(&o.LogLevel, "log-level", "debug, info, warn or error")
}

func jsonFlag(s *flagSet, o *options, help string) {
	s.Group("Output")
	s.Bool(&o.JSON, "json", help)
}

// config is a verb's options resolved, once: the configurations the
// packages take, checked, with the connection string built (and its
// password file read) one time.
type config struct {
	// Preset says which --preset is in effect and what it set, for check;
	// "" for none.
	Preset string
	// Existing is `walrelay schema --existing`.
	Existing bool
	// More are the config file's further outbox tables, after Schema's
	// and Decoder's (which are the first's); Slot.Tables and Sink.Tables
	// list them all.
	More []tableConfig
	// Entry is the first table's place in the config file (options.Entry).
	Entry  string
	Schema schema.Config
	// Decoder is how rows are read: the table, its columns, the aggregate
	// type default, --content-type and --null-payload (the verbs with the
	// column flags).
	Decoder   decoder.Config
	Slot      slot.Config
	Monitor   slot.MonitorConfig
	Leader    leader.Config
	Relay     relay.Config
	Sink      sink.Config
	Retention retention.Config
	DLQ       dlq.Options
	Topics    topicsOptions
	Backfill  backfillOptions
	Park      bool // --on-bad-message park
	GrantTo   string
	LogLevel  string
	Metrics   string // --metrics-addr
	JSON      bool
}

// resolve turns the options of the verb s parsed into its config. Only the
// parts the verb has flags for are resolved: `walrelay schema` needs no
// PostgreSQL URL, and no Kafka flag of another verb is read.
func (o options) resolve(s *flagSet) (config, error) {
	c := config{DLQ: o.DLQ, Topics: o.Topics, Backfill: o.Backfill, GrantTo: o.GrantTo, LogLevel: o.LogLevel, Metrics: o.MetricsAddr, JSON: o.JSON,
		Preset: s.PresetSummary(o.Preset), Existing: o.Existing, Entry: o.Entry}
	var err error
	if c.Schema, err = o.schemaConfig(); err != nil {
		return config{}, err
	}
	c.Decoder = o.decoderConfig(c.Schema)
	if s.Has("aggregate-type-default") || s.Has("null-payload") {
		if err := c.Decoder.Validate(); err != nil {
			return config{}, flagged(err)
		}
	}
	for i, more := range o.MoreTables {
		tc, err := more.tableConfig(s)
		if err != nil {
			return config{}, fmt.Errorf("table %d of the config file (%s): %w", i+2, more.Table, err)
		}
		c.More = append(c.More, tc)
	}
	if s.Has("on-bad-message") {
		if o.OnBadMessage != "park" && o.OnBadMessage != "halt" {
			return config{}, fmt.Errorf("--on-bad-message (WALRELAY_ON_BAD_MESSAGE) is %q; want park or halt", o.OnBadMessage)
		}
		c.Park = o.OnBadMessage == "park"
	}
	if s.Has("postgres-url") && o.wantsPostgres(s) {
		conn, err := o.postgresConnString()
		if err != nil {
			return config{}, err
		}
		repl, err := o.replicationConnString()
		if err != nil {
			return config{}, err
		}
		c.Slot = o.Slot
		c.Slot.ConnString, c.Slot.ReplicationConnString = conn, repl
		c.Slot.Table, c.Slot.Publication = c.Schema.Table, c.Schema.Publication
		c.Slot.Recoveries = c.Schema.RecoveryTable() // beside the dead-letter table, wherever that is
		c.Slot.Columns, c.Slot.AggregateTypeDefault = c.Decoder.Columns, c.Decoder.AggregateTypeDefault
		c.Slot.ContentTypeColumn = c.Decoder.ContentTypeColumn
		if len(c.More) > 0 {
			c.Slot.Tables = []slot.OutboxTable{outboxTable(c.Decoder)}
			for _, tc := range c.More {
				c.Slot.Tables = append(c.Slot.Tables, outboxTable(tc.Decoder))
			}
		}
		if err := schema.ValidateSlotName(c.Slot.Slot); err != nil {
			return config{}, err
		}
		c.Monitor = o.Monitor
		c.Monitor.Config = c.Slot
		c.Leader = o.Leader
		c.Leader.ConnString, c.Leader.Slot = c.Slot.LockConnString(), c.Slot.Slot
	}
	if s.Has("kafka-brokers") {
		if c.Sink, err = o.sinkConfig(); err != nil {
			return config{}, err
		}
		if len(c.More) > 0 {
			c.Sink.Tables = []sink.TableConfig{o.sinkTable()}
			for _, tc := range c.More {
				c.Sink.Tables = append(c.Sink.Tables, tc.Sink)
			}
		}
	}
	c.Relay = o.Relay
	if s.Has("retention") {
		c.Retention = o.retentionConfig(c.Schema)
	}
	return c, nil
}

// wantsPostgres says whether the verb connects to PostgreSQL: every verb
// with --postgres-url, but `walrelay schema` only with --existing and a
// URL (without one it prints the DDL unchecked).
func (o options) wantsPostgres(s *flagSet) bool {
	return !s.Has("existing") || o.Existing && o.PostgresURL != ""
}

// postgresConnString is --postgres-url with the --postgres-ssl* flags and
// the password of --postgres-password-file merged in (slot.ConnParams).
func (o options) postgresConnString() (string, error) {
	if o.PostgresURL == "" {
		return "", fmt.Errorf("--postgres-url (WALRELAY_POSTGRES_URL) is required")
	}
	conn, err := o.Postgres.Apply(o.PostgresURL)
	return conn, flagged(err)
}

// replicationConnString is --replication-url amended as --postgres-url is,
// or "" when it is not set (slot.Config then uses --postgres-url).
func (o options) replicationConnString() (string, error) {
	if o.ReplicationURL == "" {
		return "", nil
	}
	conn, err := o.Postgres.Apply(o.ReplicationURL)
	if err != nil {
		return "", fmt.Errorf("--replication-url: %w", flagged(err))
	}
	return conn, nil
}

// warnPostgresTLS is slot.WarnUnverifiedTLS, for run, of each URL.
func warnPostgresTLS(log *zap.Logger, c slot.Config) error {
	if err := slot.WarnUnverifiedTLS(log, c.ConnString); err != nil {
		return err
	}
	if c.ReplicationConnString == "" {
		return nil
	}
	return slot.WarnUnverifiedTLS(log, c.ReplicationConnString)
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
	return c, c.Validate()
}

// tableConfig is one outbox table of several, as its options say.
type tableConfig struct {
	Schema  schema.Config
	Decoder decoder.Config
	Sink    sink.TableConfig
	Entry   string // options.Entry
}

// tableConfig resolves the table-level options of a further table of the
// config file, for the verb s parsed.
func (o options) tableConfig(s *flagSet) (tableConfig, error) {
	sc, err := o.schemaConfig()
	if err != nil {
		return tableConfig{}, err
	}
	tc := tableConfig{Schema: sc, Decoder: o.decoderConfig(sc), Sink: o.sinkTable(), Entry: o.Entry}
	if err := tc.Decoder.Validate(); err != nil {
		return tableConfig{}, flagged(err)
	}
	if s.Has("message-id-header") {
		if err := sink.ValidateMessageIDHeader(tc.Sink.MessageIDHeader); err != nil {
			return tableConfig{}, flagged(err)
		}
	}
	return tc, nil
}

// decoderConfig is how the rows of sc's table are read.
func (o options) decoderConfig(sc schema.Config) decoder.Config {
	return decoder.Config{Table: sc.Table, Columns: sc.Columns, AggregateTypeDefault: o.AggregateTypeDefault,
		ContentType: o.ContentType, NullPayload: decoder.NullPayload(o.NullPayload), SpanContextColumn: o.SpanContextColumn,
		ContentTypeColumn: o.ContentTypeColumn}
}

// sinkTable is the table's own part of the sink's configuration.
func (o options) sinkTable() sink.TableConfig {
	return sink.TableConfig{TopicTemplate: o.Sink.TopicTemplate, Source: o.Sink.Source, MessageIDHeader: o.Sink.MessageIDHeader}
}

// outboxTable is the slot's view of a table the decoder reads by dc.
func outboxTable(dc decoder.Config) slot.OutboxTable {
	return slot.OutboxTable{Table: dc.Table, Columns: dc.Columns, AggregateTypeDefault: dc.AggregateTypeDefault, ContentTypeColumn: dc.ContentTypeColumn}
}

// withEntry adds to an error about one of several outbox tables, which
// names it, where its entry stands in the config file: what to change.
func (c config) withEntry(err error) error {
	if err == nil || len(c.More) == 0 {
		return err
	}
	tables := append([]tableConfig{{Schema: c.Schema, Entry: c.Entry}}, c.More...)
	for _, tc := range tables {
		if tc.Entry != "" && namesTable(err.Error(), tc.Schema.Table.String()) {
			return fmt.Errorf("%w (table %s: its entry is %s)", err, tc.Schema.Table, tc.Entry)
		}
	}
	return err
}

// namesTable reports whether text names the table t as a word of its own:
// not as the start of a longer name (public.a in public.ab).
func namesTable(text, t string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], " "+t)
		if j < 0 {
			return false
		}
		end := i + j + 1 + len(t)
		if end == len(text) || !isNameByte(text[end]) {
			return true
		}
		i = end
	}
}

func isNameByte(b byte) bool {
	return b == '_' || b == '$' || b == '"' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// moreSchemas are the further tables' names and walrelay's tables beside
// them (their dead-letter tables), after Schema's.
func (c config) moreSchemas() []schema.Config {
	var out []schema.Config
	for _, tc := range c.More {
		out = append(out, tc.Schema)
	}
	return out
}

// decoders are the decoder configurations of every outbox table, in
// order: Message.Table indexes them.
func (c config) decoders() []decoder.Config {
	out := []decoder.Config{c.Decoder}
	for _, tc := range c.More {
		out = append(out, tc.Decoder)
	}
	return out
}

// sinkConfig is the Kafka side as the flags set it, TLS and SASL included.
func (o options) sinkConfig() (sink.Config, error) {
	tc, mech, err := o.KafkaSecurity.Build()
	if err != nil {
		return sink.Config{}, err
	}
	c := o.Sink
	if err := sink.ValidateMessageIDHeader(c.MessageIDHeader); err != nil {
		return sink.Config{}, flagged(err)
	}
	c.Brokers = splitList(o.KafkaBrokers)
	c.NoCreateTopics = !o.CreateTopics
	c.NoIdempotence = !o.Idempotence
	if c.Compression, err = sink.ParseCompression(o.Compression); err != nil {
		return sink.Config{}, flagged(err)
	}
	c.TLS, c.SASL = tc, mech
	return c, nil
}

// retentionConfig is the pruner's configuration. A zero --prune-pause or
// --prune-wait means none (the package's zero means its default).
func (o options) retentionConfig(sc schema.Config) retention.Config {
	rc := o.Retention
	rc.Table, rc.OccurredAt, rc.Slot, rc.Recoveries = sc.Table, sc.Columns.OccurredAt, o.Slot.Slot, sc.RecoveryTable()
	if rc.Pause == 0 {
		rc.Pause = -1
	}
	if rc.Wait == 0 {
		rc.Wait = -1
	}
	return rc
}

func splitList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// parseConfig parses and resolves the options of verb. ok is false after
// -h (err nil) and after any error.
func parseConfig(verb string, args []string, stdout, stderr io.Writer) (config, bool, error) {
	o, s, err := parseOptions(verb, args, stdout, stderr)
	if errors.Is(err, errHelp) {
		return config{}, false, nil
	}
	if err != nil {
		return config{}, false, err
	}
	c, err := o.resolve(s)
	return c, err == nil, asConfigError(err)
}
