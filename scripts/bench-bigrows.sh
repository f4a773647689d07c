#!/usr/bin/env bash
# Giant rows under walrelay's default soft memory limit (DECISIONS 25): one
# transaction of ROWS rows with MB-MiB payloads, drained by walrelay twice
# from two slots made before the load (the same WAL), once with GOMEMLIMIT
# unset (walrelay's default limit) and once with GOMEMLIMIT=off. Prints wall
# time to the confirmed end, CPU seconds and peak RSS of each run. Payloads
# over --max-payload-bytes are parked in the dead-letter table, which is part
# of the work being measured. Against the rig of scripts/rig.sh.
#
#   MB=40 ROWS=4 MODES="off default" scripts/bench-bigrows.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
MB="${MB:-40}" ROWS="${ROWS:-4}" MODES="${MODES:-off default}"

scripts/rig.sh start >/dev/null 2>&1
eval "$(scripts/rig.sh env)"
PG="$WALRELAY_TEST_PG_URL"
BIN="$(mktemp -d)/walrelay"
go build -o "$BIN" ./cmd/walrelay
q() { psql "$PG" -Atq -v ON_ERROR_STOP=1 -c "$1"; }
common=(--postgres-url "$PG" --table public.bigrows_outbox --publication bigrows_pub)

cleanup() {
  q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'bigrows_%'" >/dev/null
  q "DROP TABLE IF EXISTS public.bigrows_outbox, public.bigrows_outbox_dead_letters; DROP PUBLICATION IF EXISTS bigrows_pub" 2>/dev/null
}
cleanup
trap cleanup EXIT
"$BIN" schema --table public.bigrows_outbox --publication bigrows_pub | psql "$PG" -q -v ON_ERROR_STOP=1
for mode in $MODES; do "$BIN" init "${common[@]}" --slot "bigrows_$mode" >/dev/null 2>&1; done
q "INSERT INTO public.bigrows_outbox (message_id, aggregate_type, aggregate_id, type, payload)
   SELECT gen_random_uuid(), 'big', 'a' || g, 'Big', to_jsonb(repeat(md5(g::text), $MB * 1024 * 1024 / 32))
   FROM generate_series(1, $ROWS) g"
END="$(q "SELECT pg_current_wal_insert_lsn()")"
echo "bench-bigrows.sh: $ROWS rows of $MB MiB in one transaction; $("$BIN" version)"

for mode in $MODES; do
  env=()
  [ "$mode" = off ] && env=(GOMEMLIMIT=off)
  start=$(date +%s%N)
  env "${env[@]}" "$BIN" run "${common[@]}" --slot "bigrows_$mode" --kafka-brokers "$WALRELAY_TEST_KAFKA_BROKERS" \
    --metrics-addr "" --confirm-interval 50ms 2>"${BIN%/*}/$mode.log" &
  pid=$!
  until [ "$(q "SELECT confirmed_flush_lsn >= '$END' FROM pg_replication_slots WHERE slot_name = 'bigrows_$mode'")" = t ]; do
    kill -0 "$pid" || { cat "${BIN%/*}/$mode.log" >&2; exit 1; }
    sleep 0.05
  done
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" || true
  printf '%-8s wall %6d ms   cpu %5s s   peak RSS %4d MiB\n' "GOMEMLIMIT=$([ "$mode" = off ] && echo off || echo unset)" "$wall" "$cpu" "$hwm"
done
