#!/usr/bin/env bash
# make demo DEMO=shop (or make demo-shop): the whole pattern with the example
# services of examples/: the order service takes orders over HTTP (with an
# idempotency key; order + outbox row in one transaction), walrelay publishes
# them, the warehouse reserves stock once per order through its inbox, and the
# notifier e-mails a confirmation through a durable task to a local SMTP sink.
#
#   SHOP_ORDERS       orders to submit (default 100); every tenth is sent twice
#                     with the same Idempotency-Key, as a client that lost the
#                     response would
#   SHOP_MAIL_OUTAGE  seconds the mail server is down at the start (default 5):
#                     orders are accepted anyway, the e-mails follow when it is up
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
ORDERS="${SHOP_ORDERS:-100}"
MAIL_OUTAGE="${SHOP_MAIL_OUTAGE:-5}"
STATE="$REPO/.rig/shop"
rm -rf "$STATE"
mkdir -p "$STATE/mail"

say() { printf '\n== %s\n' "$*"; }

say "building walrelay and the example services into bin/"
for p in cmd/walrelay examples/orders examples/warehouse examples/notifier examples/mailsink; do
  go build -o "bin/$(basename "$p")" "./$p"
done
scripts/rig.sh start
eval "$(scripts/rig.sh env)"
ADMIN_URL="$WALRELAY_TEST_PG_URL"
url() { echo "${ADMIN_URL/\/walrelay\?/\/$1?}"; }
SHOP_URL=$(url walrelay_shop); WH_URL=$(url walrelay_warehouse); NT_URL=$(url walrelay_notifier)
BROKERS="$WALRELAY_TEST_KAFKA_BROKERS"
# A topic of its own per run: the databases start fresh, and records an
# earlier run left in a shared topic would reach the new consumers as orders
# nobody placed (the local rig keeps Kafka's data between runs).
RUN=$(date +%Y%m%d%H%M%S)
TOPIC_TEMPLATE="outbox.shop-$RUN.{aggregate_type}"
TOPIC="outbox.shop-$RUN.order"
psqlq() { psql -qAt -v ON_ERROR_STOP=1 "$@"; }

say "fresh databases: walrelay_shop (orders + outbox), walrelay_warehouse, walrelay_notifier"
PGOPTIONS='-c client_min_messages=warning' psqlq "$ADMIN_URL" >/dev/null <<'SQL'
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'walrelay_shop' AND NOT active;
DROP DATABASE IF EXISTS walrelay_shop WITH (FORCE);
DROP DATABASE IF EXISTS walrelay_warehouse WITH (FORCE);
DROP DATABASE IF EXISTS walrelay_notifier WITH (FORCE);
CREATE DATABASE walrelay_shop;
CREATE DATABASE walrelay_warehouse;
CREATE DATABASE walrelay_notifier;
SQL

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start() { # name, then the command: runs it in the background, logging to $STATE/name.log
  local name=$1; shift
  "$@" >"$STATE/$name.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$name=$!"
}
alive() { kill -0 "$1" 2>/dev/null || { echo "$2 exited:"; tail -20 "$STATE/$2.log"; exit 1; }; }
wait_http() { for _ in $(seq 1 100); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no answer from $1"; exit 1; }

ORDERS_ADDR=127.0.0.1:8088
MAIL_ADDR=127.0.0.1:2525
say "order service on http://$ORDERS_ADDR (migrations: orders, idempotency keys, outbox + publication)"
start orders bin/orders --postgres-url "$SHOP_URL" --listen "$ORDERS_ADDR"
wait_http "http://$ORDERS_ADDR/healthz"

say "walrelay init + run (slot walrelay_shop, topic $TOPIC)"
export WALRELAY_POSTGRES_URL="$SHOP_URL" WALRELAY_KAFKA_BROKERS="$BROKERS" WALRELAY_SLOT=walrelay_shop
export WALRELAY_TOPIC_TEMPLATE="$TOPIC_TEMPLATE" WALRELAY_METRICS_ADDR=127.0.0.1:9188 WALRELAY_STATUS_INTERVAL=1s
bin/walrelay init
start walrelay bin/walrelay run

say "warehouse and notifier consumers; the mail server stays down for ${MAIL_OUTAGE}s"
start warehouse bin/warehouse --postgres-url "$WH_URL" --kafka-brokers "$BROKERS" --topic "$TOPIC"
start notifier bin/notifier --postgres-url "$NT_URL" --kafka-brokers "$BROKERS" --topic "$TOPIC" \
  --smtp-addr "$MAIL_ADDR" --retry-min 500ms --retry-max 5s
sleep 1
alive "$PID_walrelay" walrelay; alive "$PID_warehouse" warehouse; alive "$PID_notifier" notifier

say "submitting $ORDERS orders (every tenth twice with the same Idempotency-Key)"
REPLAYED=0
for i in $(seq 1 "$ORDERS"); do
  key="demo-$(date +%s%N)-$i"
  body="{\"customer_email\":\"customer$i@example.com\",\"items\":[{\"sku\":\"SKU-$((i % 7))\",\"quantity\":$((i % 3 + 1))}]}"
  first=$(curl -fsS -X POST -H "Idempotency-Key: $key" -H 'Content-Type: application/json' -d "$body" "http://$ORDERS_ADDR/orders")
  if [ $((i % 10)) -eq 0 ]; then
    again=$(curl -fsS -D "$STATE/headers" -X POST -H "Idempotency-Key: $key" -H 'Content-Type: application/json' -d "$body" "http://$ORDERS_ADDR/orders")
    [ "$first" = "$again" ] || { echo "replay answered differently: $first vs $again"; exit 1; }
    grep -qi '^Idempotent-Replayed: true' "$STATE/headers" && REPLAYED=$((REPLAYED + 1))
  fi
  [ "$i" -eq 1 ] && printf '  first answer: %s\n' "$first"
done
echo "  $ORDERS orders accepted, $REPLAYED retries answered from the idempotency store"

count() { psqlq "$1" -c "$2"; }
sleep "$MAIL_OUTAGE"
printf '  while mail is down: %s e-mail tasks pending, %s send attempts failed so far\n' \
  "$(count "$NT_URL" "SELECT count(*) FROM email_tasks WHERE status = 'pending'")" \
  "$(count "$NT_URL" "SELECT coalesce(sum(attempts), 0) FROM email_tasks")"
say "mail server up on $MAIL_ADDR (mails in $STATE/mail)"
start mailsink bin/mailsink --listen "$MAIL_ADDR" --dir "$STATE/mail"

for tick in $(seq 1 120); do
  R=$(count "$WH_URL" 'SELECT count(*) FROM reservations')
  S=$(count "$NT_URL" "SELECT count(*) FROM email_tasks WHERE status = 'sent'")
  printf '  orders %s | reservations %s | e-mails sent %s\n' "$(count "$SHOP_URL" 'SELECT count(*) FROM orders')" "$R" "$S"
  [ "$R" -ge "$ORDERS" ] && [ "$S" -ge "$ORDERS" ] && break
  [ "$tick" -eq 120 ] && { echo "not every order was reserved and e-mailed within 2 minutes; logs in $STATE"; exit 1; }
  sleep 1
done

say "result"
printf '  orders: %s (distinct idempotency keys)\n' "$(count "$SHOP_URL" 'SELECT count(*) FROM orders')"
printf '  outbox rows: %s\n' "$(count "$SHOP_URL" 'SELECT count(*) FROM outbox_messages')"
printf '  reservations: %s for %s distinct orders\n' "$(count "$WH_URL" 'SELECT count(*) FROM reservations')" \
  "$(count "$WH_URL" 'SELECT count(DISTINCT order_id) FROM reservations')"
printf '  e-mails in the sink: %s\n' "$(find "$STATE/mail" -name '*.eml' | wc -l)"
echo "  one of them:"
sed -n '1,12p' "$(find "$STATE/mail" -name '*.eml' | sort | head -1)" | sed 's/^/    /'
