#!/usr/bin/env python3
"""Evaluates the shipped Grafana dashboard's queries against a Prometheus that
watched a demo run, and prints them by phase around a Kafka outage.

usage: dashboard_report.py PROMETHEUS_URL DASHBOARD_JSON START STOPPED STARTED END
(times in Unix seconds: the run's start, Kafka stopped, Kafka started, the run's end)
"""
import json
import sys
import urllib.parse
import urllib.request

# Dashboard panels to report: (title, which target of the panel, column, unit).
PANELS = [
    ("Slot lag", 0, "slot lag", "bytes"),
    ("Oldest unpublished message", 0, "oldest age", "s"),
    ("Throughput", 0, "throughput", "msg/s"),
    ("Commit to Kafka ack latency", 1, "p99 latency", "s"),
    ("In flight", 0, "in flight", "msgs"),
]
STEP = 10


def targets(dashboard):
    out = {}

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            if p.get("targets"):
                out.setdefault(p.get("title"), [t["expr"] for t in p["targets"]])

    walk(dashboard["panels"])
    return out


def concrete(expr):
    return (expr.replace('=~"$job"', '="walrelay"').replace('=~"$instance"', '=~".*"')
            .replace("$__rate_interval", "30s"))


def query_range(url, expr, start, end):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": STEP})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    series = body["data"]["result"]
    if not series:
        return {}
    return {int(float(t)): float(v) for t, v in series[0]["values"]}


def human(v, unit):
    if v is None or v != v:
        return "-"
    if unit == "bytes":
        for u in ["B", "KiB", "MiB", "GiB"]:
            if abs(v) < 1024 or u == "GiB":
                return f"{v:.0f} {u}" if u == "B" else f"{v:.1f} {u}"
            v /= 1024
    if unit == "s" and v < 1:
        return f"{v * 1000:.0f} ms"
    if unit == "s":
        return f"{v:.1f} s"
    return f"{v:.0f}"


def main():
    url, dash_path = sys.argv[1], sys.argv[2]
    start, stopped, started, end = (int(x) for x in sys.argv[3:7])
    # Prometheus evaluates a range at start + k * STEP: align start, so the
    # rows below find their samples.
    start += -start % STEP
    dash = targets(json.load(open(dash_path)))
    cols = []
    for title, i, name, unit in PANELS:
        expr = concrete(dash[title][i])
        cols.append((name, unit, expr, query_range(url, expr, start, end)))
    print("Queries (from deploy/grafana/walrelay-dashboard.json, $__rate_interval=30s):")
    for name, _, expr, _ in cols:
        print(f"  {name:12} {expr}")
    print()
    phases = {"before": [], "during": [], "after": []}
    header = f"{'t (s)':>6}  {'phase':7}" + "".join(f"  {name:>12}" for name, *_ in cols)
    print(header)
    for t in range(start, end + 1, STEP):
        phase = "before" if t < stopped else "during" if t < started else "after"
        row = [c[3].get(t) for c in cols]
        phases[phase].append(row)
        print(f"{t - stopped:>6}  {phase:7}" + "".join(f"  {human(v, c[1]):>12}" for v, c in zip(row, cols)))
    print()
    print("By phase: max (last)")
    for phase, rows in phases.items():
        cells = []
        for j, (name, unit, _, _) in enumerate(cols):
            vals = [r[j] for r in rows if r[j] is not None]
            cells.append(f"{name} {human(max(vals), unit)} ({human(vals[-1], unit)})" if vals else f"{name} -")
        print(f"  {phase:7} " + "; ".join(cells))
    q = urllib.parse.urlencode({"query": 'max_over_time(ALERTS{alertstate="firing"}[1h])', "time": end + 60})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=30) as r:
        alerts = sorted({s["metric"]["alertname"] for s in json.load(r)["data"]["result"]})
    print()
    print("Alerts that fired during the run: " + (", ".join(alerts) if alerts else "none"))


if __name__ == "__main__":
    main()
