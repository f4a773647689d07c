-- The demo application's own table.
CREATE TABLE IF NOT EXISTS orders (
    id           bigserial   PRIMARY KEY,
    customer     text        NOT NULL,
    amount_cents bigint      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
