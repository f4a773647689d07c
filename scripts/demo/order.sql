-- One business command as an application would run it: the order and its
-- outbox message in ONE transaction. pgbench runs this at a fixed rate.
\set amount random(100, 99999)
BEGIN;
WITH o AS (
    INSERT INTO orders (customer, amount_cents) VALUES ('customer-' || :client_id, :amount)
    RETURNING id, customer, amount_cents, created_at
)
INSERT INTO outbox_messages (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload, headers)
SELECT gen_random_uuid(), 'order', o.id::text, 1, 'order.submitted.v1',
       jsonb_build_object('order_id', o.id, 'customer', o.customer, 'amount_cents', o.amount_cents, 'created_at', o.created_at),
       jsonb_build_object('correlation_id', gen_random_uuid()::text)
FROM o;
COMMIT;
