//go:build bench

package drain

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// tablesReport is tables.md: how to reproduce it, the machine, the two
// sides' median rounds side by side with their ratios, and how to read them.
// all holds each round's two sides; load is the machine's load average
// around the runs.
func tablesReport(t *testing.T, pgURL, brokers string, scale float64, tb *tablesBacklog, all [][sideCount]tablesRun, load string) string {
	var b strings.Builder
	header(&b, t, "Tables: three outbox tables through one slot or three (issue 36)", fmt.Sprintf(
		"cd test && WALRELAY_BENCH_SCALE=%g go test -tags bench -run TestBenchTables -count=1 -timeout 30m -v ./bench/drain", scale),
		pgURL, brokers, load)
	one, three, apart := medianSide(all, sideOne), medianSide(all, sideThree), medianSide(all, sideApart)
	b.WriteString("| relays | slots | rows | wall s | msg/s | walrelay CPU s | walsender CPU s | walsender µs/msg | Kafka broker CPU s (JIT) | peak RSS MiB |\n")
	b.WriteString("|" + strings.Repeat("---|", 10) + "\n")
	tablesRow(&b, "one walrelay, the three tables", 1, tb.rows, one)
	tablesRow(&b, "three walrelays, one table each, at once", len(tb.tables), tb.rows, three)
	ratioRow(&b, "**three / one**", "**", len(tb.tables), one.total, three.total)
	tablesRow(&b, "for reference: the three one after another", len(tb.tables), tb.rows, apart)
	ratioRow(&b, "one after another / one", "", len(tb.tables), one.total, apart.total)
	b.WriteString("\nThree at once / one in each round (")
	for round, r := range all {
		if round > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d: walsender CPU %.2f, walrelay CPU %.2f, wall %.2f", round+1,
			ratio(r[sideThree].total.walsender, r[sideOne].total.walsender), ratio(r[sideThree].total.cpu, r[sideOne].total.cpu),
			ratio(r[sideThree].total.wall, r[sideOne].total.wall))
	}
	b.WriteString(").\n")
	fmt.Fprintf(&b, `
- rows: WALRELAY_BENCH_SCALE times %d single-row transactions, taking the three tables in turn (%s rows):
  walrelay's own shape (`+"`walrelay schema`"+`) in public, EF Core's and Debezium's (`+"`preset: debezium`"+`) in a second schema,
  payloads of ~%d B (JSON around random base64 text), 1,000 aggregate ids.
- one: one walrelay whose config file lists the three tables, on one slot of one publication of the three. three: three
  walrelays at once, each with a config file of one table, each on a slot of its own and a publication of its table
  alone (what three relays are set up with). For reference, the same three relays one after another, each alone
  beside the database and the broker, on slots of their own (wall: the sum of theirs). `+"`walrelay init`"+` made every
  publication and slot before the load: every run drains the same WAL. Each run publishes to topics of its own
  (3 partitions, acks=all), each then checked to hold a record for every row of its table.
- wall s: from process start until its slot's confirmed_flush_lsn reached the end of the load (polled every 20 ms;
  walrelay runs with --confirm-interval 20ms), for three the last of the three; msg/s: all rows over it. walrelay CPU s:
  user + system time (rusage); walsender CPU s: the server process serving each slot (its active_pid, /proc); peak RSS:
  VmHWM; for three, each is the sum over the three relays (each relay's in parentheses). Kafka broker CPU s: the
  broker's during the run (JIT: of it, its compiler threads').
- Why three slots cost the database more: a logical slot's walsender decodes all of the database's WAL. Each of the
  three walsenders reads and decodes every table's rows (the reorder buffer keeps every transaction's changes) and
  pgoutput drops the other tables' rows only when it would send them. Decoding is paid three times, sending once: the
  walsender ratio nears 3 where decoding dominates its CPU, and stays below it by what the sends of its own table's
  rows cost (a send() per message; see "The database's CPU"). The one-after-another line shows that cost without
  the relays' company; what the three at once spend beyond it is what running side by side costs on these cores (six
  processes, the broker's and the load's besides, for two CPUs; a walsender that publishes every third row leaves its
  relay waiting, and each message may wake it on its own, see "The eager-reader effect"), and three start-ups
  (preflight, leader lock, Kafka metadata: about 0.1 s of CPU each) weigh on a short drain.
- %d round(s) (3 for a short backlog, as the drain's, or as many as the server's free replication slots hold: a round
  needs 7, all made before the load); the sides take turns going first, and each side shows its median round by wall
  time (of two rounds, the slower). On this machine's %d CPUs PostgreSQL, Kafka and the relays share the cores, and
  other work may run beside them: read the ratios, not the second digit of a time.
`, tablesRows, perTable(tb), tablesPayload, len(all), runtime.NumCPU())
	return b.String()
}

// perTable is the rows loaded into each table, as "a / b / c".
func perTable(tb *tablesBacklog) string {
	var s []string
	for _, n := range tb.perTable {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, " / ")
}

// ratioRow is the line of side h's figures over side o's; em marks the
// three the issue asks about (markdown's bold).
func ratioRow(b *strings.Builder, name, em string, slots int, o, h measure) {
	fmt.Fprintf(b, "| %s | %d | | %s%.2f%s | %.2f | %s%.2f%s | %s%.2f%s | | %.2f | %.2f |\n",
		name, slots, em, ratio(h.wall, o.wall), em, ratio(o.wall, h.wall), em, ratio(h.cpu, o.cpu), em,
		em, ratio(h.walsender, o.walsender), em, ratio(h.broker, o.broker), float64(h.maxRSS)/float64(max(o.maxRSS, 1)))
}

// tablesRow is one side's line: the totals, and for several relays each
// relay's share of the CPU, walsender CPU and peak RSS.
func tablesRow(b *strings.Builder, name string, slots int, rows int64, r tablesRun) {
	m := r.total
	parts := func(f func(measure) float64, format string) string {
		if len(r.relays) < 2 {
			return ""
		}
		var ps []string
		for _, m := range r.relays {
			ps = append(ps, fmt.Sprintf(format, f(m)))
		}
		return " (" + strings.Join(ps, " + ") + ")"
	}
	cpu := func(m measure) float64 { return m.cpu.Seconds() }
	ws := func(m measure) float64 { return m.walsender.Seconds() }
	rss := func(m measure) float64 { return float64(m.maxRSS >> 20) }
	fmt.Fprintf(b, "| %s | %d | %d | %.2f | %.0f | %.2f%s | %.2f%s | %.1f | %.2f (%.2f) | %d%s |\n",
		name, slots, rows, m.wall.Seconds(), float64(rows)/m.wall.Seconds(),
		m.cpu.Seconds(), parts(cpu, "%.2f"), m.walsender.Seconds(), parts(ws, "%.2f"),
		float64(m.walsender.Microseconds())/float64(rows), m.broker.Seconds(), m.brokerJIT.Seconds(),
		m.maxRSS>>20, parts(rss, "%.0f"))
}

// medianSide is the side's round with the median wall time.
func medianSide(all [][sideCount]tablesRun, side tablesSide) tablesRun {
	runs := make([]tablesRun, len(all))
	for i, r := range all {
		runs[i] = r[side]
	}
	slices.SortFunc(runs, func(a, b tablesRun) int { return cmp.Compare(a.total.wall, b.total.wall) })
	return runs[len(runs)/2]
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / max(b.Seconds(), 1e-9) }
