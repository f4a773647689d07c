#!/usr/bin/env bash
# make demo: local PostgreSQL + Kafka, a demo database whose "application"
# (pgbench) writes orders with their outbox rows, walrelay publishing them,
# and a live view of messages arriving in Kafka and of the slot lag.
#
#   DEMO_SECONDS   how long the order stream runs (default 20)
#   DEMO_RATE      orders per second (default 200)
#   DEMO_KAFKA_OUTAGE=AT:LEN
#                  stop Kafka AT seconds into the order stream for LEN seconds
#                  (scripts/kafka.sh stop, then start): walrelay holds the slot's
#                  position, then catches up (scripts/demo-outage.sh uses it)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
SECONDS_TO_RUN="${DEMO_SECONDS:-20}"
RATE="${DEMO_RATE:-200}"
STATE="$REPO/.rig/demo"
mkdir -p "$STATE"
rm -f "$STATE"/kafka-*-at

[ -x bin/walrelay ] || go build -o bin/walrelay ./cmd/walrelay
scripts/rig.sh start
eval "$(scripts/rig.sh env)"
ADMIN_URL="$WALRELAY_TEST_PG_URL"
DB_URL="${ADMIN_URL/\/walrelay\?/\/walrelay_demo?}"
PGBIN=/usr/lib/postgresql/15/bin

say() { printf '\n== %s\n' "$*"; }

say "fresh demo database walrelay_demo"
PGOPTIONS='-c client_min_messages=warning' psql -qAt "$ADMIN_URL" -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'walrelay_demo' AND NOT active;
DROP DATABASE IF EXISTS walrelay_demo WITH (FORCE);
CREATE DATABASE walrelay_demo;
SQL
psql -q "$DB_URL" -v ON_ERROR_STOP=1 -f scripts/demo/orders.sql
bin/walrelay schema | psql -q "$DB_URL" -v ON_ERROR_STOP=1

export WALRELAY_POSTGRES_URL="$DB_URL"
export WALRELAY_KAFKA_BROKERS="$WALRELAY_TEST_KAFKA_BROKERS"
export WALRELAY_SLOT=walrelay_demo
export WALRELAY_METRICS_ADDR=127.0.0.1:9187
export WALRELAY_STATUS_INTERVAL=1s

say "walrelay init"
bin/walrelay init

say "walrelay run (log: $STATE/walrelay.log, metrics: http://$WALRELAY_METRICS_ADDR/metrics)"
bin/walrelay run >"$STATE/walrelay.log" 2>&1 &
RELAY=$!
trap 'kill $RELAY 2>/dev/null || true' EXIT
sleep 1
kill -0 "$RELAY" 2>/dev/null || { cat "$STATE/walrelay.log"; exit 1; }

offsets() { # records in outbox.order: the sum of its partitions' end offsets
  local parts args=()
  parts=$(kcat -b "$WALRELAY_TEST_KAFKA_BROKERS" -L -t outbox.order 2>/dev/null | awk '$1 == "partition" { sub(",", "", $2); print $2 }')
  [ -n "$parts" ] || { echo 0; return; }
  for p in $parts; do args+=(-t "outbox.order:$p:-1"); done
  kcat -b "$WALRELAY_TEST_KAFKA_BROKERS" -Q "${args[@]}" 2>/dev/null | awk '{ n += $NF } END { print n + 0 }'
}
lag() {
  psql -Atq "$DB_URL" -c "SELECT pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)) FROM pg_replication_slots WHERE slot_name = 'walrelay_demo'"
}

BASE=$(offsets) # the topic outlives earlier demo runs: count only this run's records
say "writing orders at $RATE/s for ${SECONDS_TO_RUN}s (order row + outbox row in one transaction)"
"$PGBIN/pgbench" -n -f scripts/demo/order.sql -c 4 -j 2 -R "$RATE" -T "$SECONDS_TO_RUN" "$DB_URL" >"$STATE/pgbench.log" 2>&1 &
BENCH=$!
START=$(date +%s.%N)
OUTAGE_AT=""; OUTAGE_LEN=""; KAFKA_DOWN=""
if [ -n "${DEMO_KAFKA_OUTAGE:-}" ]; then
  OUTAGE_AT="${DEMO_KAFKA_OUTAGE%%:*}"; OUTAGE_LEN="${DEMO_KAFKA_OUTAGE##*:}"
fi
elapsed() { awk -v s="$START" -v n="$(date +%s.%N)" 'BEGIN { printf "%d", n - s }'; }
metric() { curl -fsS "http://$WALRELAY_METRICS_ADDR/metrics" 2>/dev/null | awk -v m="$1" '$1 == m { print $2 }'; }
while kill -0 "$BENCH" 2>/dev/null; do
  sleep 2
  if [ -n "$OUTAGE_AT" ] && [ -z "$KAFKA_DOWN" ] && [ "$(elapsed)" -ge "$OUTAGE_AT" ]; then
    say "t=$(elapsed)s: stopping Kafka for ${OUTAGE_LEN}s"
    scripts/kafka.sh stop >/dev/null
    date +%s >"$STATE/kafka-stopped-at"
    KAFKA_DOWN=$(elapsed)
  elif [ -n "$KAFKA_DOWN" ] && [ "$KAFKA_DOWN" != done ] && [ "$(elapsed)" -ge "$((KAFKA_DOWN + OUTAGE_LEN))" ]; then
    say "t=$(elapsed)s: starting Kafka again"
    scripts/kafka.sh start >/dev/null
    date +%s >"$STATE/kafka-started-at"
    KAFKA_DOWN=done
  fi
  if [ -n "$KAFKA_DOWN" ] && [ "$KAFKA_DOWN" != done ]; then
    printf '  t=%3ss outbox rows %6s | in Kafka (down)  | slot lag %-8s | oldest unpublished %ss\n' \
      "$(elapsed)" "$(psql -Atq "$DB_URL" -c 'SELECT count(*) FROM outbox_messages')" "$(lag)" "$(metric walrelay_oldest_unpublished_message_age_seconds)"
  else
    printf '  t=%3ss outbox rows %6s | in Kafka %6s | slot lag %-8s | oldest unpublished %ss\n' \
      "$(elapsed)" "$(psql -Atq "$DB_URL" -c 'SELECT count(*) FROM outbox_messages')" "$(($(offsets) - BASE))" "$(lag)" \
      "$(metric walrelay_oldest_unpublished_message_age_seconds)"
  fi
done
if [ -n "$KAFKA_DOWN" ] && [ "$KAFKA_DOWN" != done ]; then
  say "starting Kafka again"
  scripts/kafka.sh start >/dev/null
fi
wait "$BENCH" || { cat "$STATE/pgbench.log"; exit 1; }
ROWS=$(psql -Atq "$DB_URL" -c 'SELECT count(*) FROM outbox_messages')
for _ in $(seq 1 240); do
  [ "$(($(offsets) - BASE))" -ge "$ROWS" ] && break
  sleep 0.5
done
END=$(date +%s.%N)
GOT=$(($(offsets) - BASE))
sleep 2 # one more status interval, so the slot confirms the end

say "three of the messages, as a consumer sees them"
kcat -b "$WALRELAY_TEST_KAFKA_BROKERS" -C -t outbox.order -o "-3" -e -q \
  -f 'partition %p offset %o key %k\n  headers %h\n  value %s\n'

say "result"
printf '  orders committed: %s, messages in Kafka: %s, %.0f messages/s end to end\n' \
  "$ROWS" "$GOT" "$(awk -v n="$GOT" -v s="$START" -v e="$END" 'BEGIN { print n / (e - s) }')"
printf '  slot lag now: %s\n' "$(lag)"
printf '  walrelay metrics:\n'
curl -fsS "http://$WALRELAY_METRICS_ADDR/metrics" | grep -E '^walrelay_(published_messages_total|confirmed_lsn|slot_lag_bytes)' | sed 's/^/    /'

kill -TERM "$RELAY"
wait "$RELAY" && echo "  walrelay stopped cleanly (exit 0)" || echo "  walrelay exited with $?"
trap - EXIT
[ "$GOT" -ge "$ROWS" ] || { echo "demo: only $GOT of $ROWS messages reached Kafka" >&2; exit 1; }
echo
echo "The services keep running: 'make rig-down' stops them."
