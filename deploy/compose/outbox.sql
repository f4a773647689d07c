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

-- Insert-only, and for the outbox table alone: walrelay publishes inserts,
-- so deleting published rows (retention) never reaches Kafka.
DO $walrelay$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'walrelay_outbox') THEN
        CREATE PUBLICATION "walrelay_outbox" FOR TABLE "public"."outbox_messages" WITH (publish = 'insert');
    END IF;
END
$walrelay$;
