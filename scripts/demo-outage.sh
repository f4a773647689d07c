#!/usr/bin/env bash
# make demo-outage: the demo (scripts/demo.sh) with Kafka stopped for a minute,
# watched by a real Prometheus that scrapes walrelay every 2s and evaluates the
# shipped alert rules; at the end it evaluates the shipped dashboard's queries
# over the run and prints them before, during and after the outage.
#
#   OUTAGE_BEFORE  seconds of orders before Kafka stops (default 60)
#   OUTAGE_LEN     seconds Kafka stays down (default 60)
#   OUTAGE_AFTER   seconds of orders after Kafka is back (default 90)
#   DEMO_RATE      orders per second (default 200)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BEFORE="${OUTAGE_BEFORE:-60}"
LEN="${OUTAGE_LEN:-60}"
AFTER="${OUTAGE_AFTER:-90}"
STATE="$REPO/.rig/demo-outage"
PORT="${WALRELAY_PROMETHEUS_PORT:-59090}"
command -v python3 >/dev/null || { echo "demo-outage: needs python3" >&2; exit 1; }

PROM="$(scripts/promtool.sh prometheus)"
rm -rf "$STATE"
mkdir -p "$STATE"
cat >"$STATE/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - $REPO/deploy/prometheus/walrelay-rules.yml
scrape_configs:
  - job_name: walrelay
    static_configs:
      - targets: ["127.0.0.1:9187"]
YAML
"$PROM" --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
  --web.listen-address="127.0.0.1:$PORT" >"$STATE/prometheus.log" 2>&1 &
PROM_PID=$!
trap 'kill $PROM_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$PORT/-/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$PORT/-/ready" >/dev/null || { cat "$STATE/prometheus.log"; exit 1; }
echo "== Prometheus on http://127.0.0.1:$PORT (rules: deploy/prometheus/walrelay-rules.yml)"

START=$(date +%s)
DEMO_SECONDS=$((BEFORE + LEN + AFTER)) DEMO_KAFKA_OUTAGE="$BEFORE:$LEN" scripts/demo.sh
sleep 5 # a last scrape and rule evaluation
END=$(date +%s)

echo
echo "== the dashboard's queries over the run (t = seconds since Kafka stopped)"
python3 scripts/demo/dashboard_report.py "http://127.0.0.1:$PORT" deploy/grafana/walrelay-dashboard.json \
  "$START" "$(cat .rig/demo/kafka-stopped-at)" "$(cat .rig/demo/kafka-started-at)" "$END"
