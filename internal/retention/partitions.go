package retention

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// A partitioned outbox table (PARTITION BY RANGE on its occurred_at
// column) retires old rows the cheap way: a partition whose whole range is
// older than the cutoff is detached and dropped instead of deleted row by
// row, with no dead tuples left for VACUUM. Config.DropPartitions asks for
// it; the rows of the other partitions are deleted as ever.
//
// A partition is dropped only once every row in it is confirmed. Its range
// says every row is older than the cutoff; the slot passing the mark says
// every transaction that committed before the mark was published. A
// transaction after the mark may still have written a row with an old
// occurred_at into it, so: DETACH PARTITION ... CONCURRENTLY (which waits
// for every transaction that could write there, and lets none in after,
// without blocking the writers of the other partitions), then a second
// mark, taken after the detach, which the slot must pass too. When it does
// not in time, the partition is attached again as it was and nothing is
// dropped.

// Partition is a partition of the outbox table old enough to be dropped.
type Partition struct {
	Table schema.Table
	// Bound is its bound as pg_get_expr prints it, "FOR VALUES FROM (...)
	// TO (...)": what attaches it again.
	Bound string
}

// partitionKeySQL says whether $1 is partitioned by RANGE on the column
// $2 alone, and whether it has a default partition (DETACH ... CONCURRENTLY
// refuses to run then). No row: not partitioned.
const partitionKeySQL = `SELECT p.partstrat = 'r' AND p.partnatts = 1 AND a.attname = $2,
	format_type(a.atttypid, a.atttypmod), p.partdefid <> 0
	FROM pg_partitioned_table p JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
	WHERE p.partrelid = to_regclass($1)`

// partitionsSQL lists the table's attached leaf partitions and their
// bounds (a sub-partitioned partition is left to the row deletes).
const partitionsSQL = `SELECT n.nspname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid)
	FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE i.inhparent = to_regclass($1) AND NOT i.inhdetachpending AND c.relkind = 'r'
	ORDER BY 3`

// upperBound is the TO (...) of a range bound: a quoted literal, or
// MAXVALUE (never before any cutoff).
var upperBound = regexp.MustCompile(`^FOR VALUES FROM \(.*\) TO \('((?:[^']|'')*)'\)$`)

// OldPartitions returns the partitions whose whole range lies before
// cutoff, oldest first. It returns none, with the reason to log, when the
// table is not partitioned by RANGE on the occurred_at column, or has a
// default partition; none and no reason when it is not partitioned.
func (p *Pruner) OldPartitions(ctx context.Context, m Mark) ([]Partition, string, error) {
	var byOccurred, hasDefault bool
	var colType string
	err := p.db.QueryRow(ctx, partitionKeySQL, p.table, p.cfg.OccurredAt).Scan(&byOccurred, &colType, &hasDefault)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("read the partitioning of %s: %w", p.table, err)
	case !byOccurred:
		return nil, fmt.Sprintf("%s is not partitioned by RANGE (%s) alone", p.cfg.Table, schema.QuoteIdentifier(p.cfg.OccurredAt)), nil
	case hasDefault:
		return nil, fmt.Sprintf("%s has a default partition, and DETACH PARTITION CONCURRENTLY refuses to run beside one", p.cfg.Table), nil
	}
	rows, err := p.db.Query(ctx, partitionsSQL, p.table)
	if err != nil {
		return nil, "", fmt.Errorf("read the partitions of %s: %w", p.table, err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var pt Partition
		return pt, r.Scan(&pt.Table.Schema, &pt.Table.Name, &pt.Bound)
	})
	if err != nil {
		return nil, "", fmt.Errorf("read the partitions of %s: %w", p.table, err)
	}
	var old []Partition
	for _, pt := range parts {
		up := upperBound.FindStringSubmatch(pt.Bound)
		if up == nil {
			continue // MAXVALUE, or not a bound walrelay reads
		}
		// The literal in the column's own type, compared as the row
		// deletes compare the column: on the server, in its time zone.
		var before bool
		q := "SELECT $1::text::" + colType + " <= $2"
		if err := p.db.QueryRow(ctx, q, strings.ReplaceAll(up[1], "''", "'"), m.Cutoff).Scan(&before); err != nil {
			return nil, "", fmt.Errorf("compare the bound of partition %s with the cutoff: %w", pt.Table, err)
		}
		if before {
			old = append(old, pt)
		}
	}
	return old, "", nil
}

// DropPartitions detaches the partitions, waits for the slot to pass a
// mark taken after, and drops them. When the slot does not pass it, or a
// step fails, the partitions detached so far are attached again (what
// cannot be is said in the error) and none is dropped.
func (p *Pruner) DropPartitions(ctx context.Context, parts []Partition) (dropped []Partition, err error) {
	var detached []Partition
	undo := func(cause error) ([]Partition, error) {
		for _, pt := range detached {
			q := "ALTER TABLE " + p.table + " ATTACH PARTITION " + pt.Table.Quoted() + " " + pt.Bound
			if _, err := p.db.Exec(context.WithoutCancel(ctx), q); err != nil {
				cause = fmt.Errorf("%w; and attaching partition %s again failed (%v): run %s as the table's owner", cause, pt.Table, err, q)
			}
		}
		return nil, cause
	}
	for _, pt := range parts {
		q := "ALTER TABLE " + p.table + " DETACH PARTITION " + pt.Table.Quoted() + " CONCURRENTLY"
		if _, err := p.db.Exec(context.WithoutCancel(ctx), q); err != nil {
			return undo(fmt.Errorf("detach partition %s: %w", pt.Table, err))
		}
		detached = append(detached, pt)
		p.log.Info("partition detached", zap.String("partition", pt.Table.String()), zap.String("bound", pt.Bound))
	}
	m, err := p.Mark(ctx)
	if err != nil {
		return undo(err)
	}
	if _, err := p.WaitConfirmed(ctx, m); err != nil {
		return undo(fmt.Errorf("the detached partitions' rows are not all confirmed: %w", err))
	}
	for _, pt := range detached {
		if _, err := p.db.Exec(context.WithoutCancel(ctx), "DROP TABLE "+pt.Table.Quoted()); err != nil {
			// The rest stay detached: every row in them is confirmed.
			return dropped, fmt.Errorf("drop partition %s (detached, its rows all published): %w", pt.Table, err)
		}
		dropped = append(dropped, pt)
		p.log.Info("partition dropped", zap.String("partition", pt.Table.String()))
	}
	return dropped, nil
}
