-- walrelay outbox contract. Apply with your migrations; walrelay reads
-- committed INSERTs into this table from the WAL and publishes them to Kafka.
-- Write the business change and the outbox row in ONE transaction.
CREATE TABLE IF NOT EXISTS "public"."outbox_messages" (
    "message_id"        uuid        PRIMARY KEY,
    "aggregate_type"    text        NOT NULL,
    "aggregate_id"      text        NOT NULL CHECK ("aggregate_id" <> ''),
    "aggregate_version" bigint,
    "type"             text        NOT NULL,
    "payload"          jsonb       NOT NULL,
    "headers"          jsonb,
    "occurred_at"       timestamptz NOT NULL DEFAULT now(),
    "topic"            text
);
-- For retention: `walrelay prune` finds old rows by occurred_at.
CREATE INDEX IF NOT EXISTS "outbox_messages_occurred_at" ON "public"."outbox_messages" ("occurred_at");

-- Insert-only, and for the outbox table alone: walrelay publishes inserts,
-- so deleting published rows (retention) never reaches Kafka.
DO $walrelay$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'walrelay_outbox') THEN
        CREATE PUBLICATION "walrelay_outbox" FOR TABLE "public"."outbox_messages" WITH (publish = 'insert', publish_via_partition_root = true);
    END IF;
END
$walrelay$;

-- Dead letters: outbox rows walrelay could not publish (a record Kafka
-- refuses, a row that cannot be decoded) and the later rows of the same
-- aggregate parked behind them, so that the aggregate keeps its order.
-- walrelay writes a row here before the slot's position may pass it; list,
-- retry and discard them with `walrelay dlq`. Keyed by the row's place in
-- the WAL (commit LSN of its transaction, place among its outbox rows).
-- topic is the row's own topic override, target_topic the topic walrelay
-- resolved for it; row_data holds, as text, the columns of a row that could
-- not be decoded. A 'parked' row with an aggregate_id blocks the later rows
-- of its aggregate (blocked_by names it); 'discarded' rows are kept for audit.
CREATE TABLE IF NOT EXISTS "public"."outbox_messages_dead_letters" (
    commit_lsn        pg_lsn      NOT NULL,
    seq               integer     NOT NULL,
    message_id        text,
    aggregate_type    text,
    aggregate_id      text,
    aggregate_version bigint,
    type              text,
    topic             text,
    target_topic      text,
    payload           bytea,
    content_type      text,
    headers           jsonb,
    occurred_at       timestamptz,
    committed_at      timestamptz,
    row_data          jsonb,
    reason            text        NOT NULL,
    blocked_by        text,
    status            text        NOT NULL DEFAULT 'parked' CHECK (status IN ('parked', 'discarded')),
    parked_at         timestamptz NOT NULL DEFAULT now(),
    retries           integer     NOT NULL DEFAULT 0,
    last_error        text,
    discarded_at      timestamptz,
    discard_reason    text,
    PRIMARY KEY (commit_lsn, seq)
);
CREATE INDEX IF NOT EXISTS "outbox_messages_dead_letters_parked" ON "public"."outbox_messages_dead_letters" (aggregate_type, aggregate_id, commit_lsn, seq)
    WHERE status = 'parked';

-- Recoveries: one row per slot, its last `walrelay recover`. While a
-- recovery is pending (finished_at NULL) walrelay does not stream from the
-- slot and `walrelay prune` keeps the rows it still has to publish: those
-- with occurred_at >= since (every row when since is NULL). started_by is
-- the host and pid of the recover process; force_reason the --force reason
-- when it replaced a usable slot; consistent_lsn the new slot's consistent
-- point, once created; published and parked its counts, once finished.
CREATE TABLE IF NOT EXISTS "public"."outbox_messages_recoveries" (
    slot_name      text        PRIMARY KEY,
    since          timestamptz,
    started_at     timestamptz NOT NULL DEFAULT now(),
    started_by     text,
    force_reason   text,
    consistent_lsn pg_lsn,
    finished_at    timestamptz,
    published      bigint,
    parked         bigint
);

-- Topic layouts: the partition count each topic's keys are routed by, one
-- row per topic walrelay has published to. walrelay records a topic's count
-- when it first publishes to it; when Kafka later reports another count (the
-- topic was grown, or deleted and made again), walrelay stops publishing to
-- that topic rather than move its aggregates to other partitions unnoticed,
-- until `walrelay topics accept --topic T` records the new count.
-- recorded_by says who recorded it: walrelay's first publish, or the accept
-- and its reason.
CREATE TABLE IF NOT EXISTS "public"."outbox_messages_topics" (
    topic       text        PRIMARY KEY,
    partitions  integer     NOT NULL CHECK (partitions > 0),
    recorded_at timestamptz NOT NULL DEFAULT now(),
    recorded_by text
);

-- What walrelay's role walrelay needs on these tables (run as their owner).
GRANT USAGE ON SCHEMA "public" TO "walrelay";
GRANT SELECT ON "public"."outbox_messages" TO "walrelay";
GRANT SELECT, INSERT, UPDATE, DELETE ON "public"."outbox_messages_dead_letters" TO "walrelay";
GRANT SELECT, INSERT, UPDATE, DELETE ON "public"."outbox_messages_recoveries" TO "walrelay";
GRANT SELECT, INSERT, UPDATE ON "public"."outbox_messages_topics" TO "walrelay";
