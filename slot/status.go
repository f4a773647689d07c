package slot

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
)

// Status is what `walrelay status` shows of a slot and its publication. A
// missing slot or publication is part of the status, not an error: status
// is what an operator runs when something is wrong.
type Status struct {
	// Figures are the slot's row of pg_replication_slots and the server's
	// current WAL position; Exists is false for a missing slot.
	Figures
	Publication PublicationStatus
	// IdleTimeout is the server's idle_replication_slot_timeout
	// (PostgreSQL 18 and later; nil before): a slot no one streams from for
	// that long is invalidated.
	IdleTimeout *string
	// Provider is who runs the server (DetectProvider): "self-managed"
	// when no managed provider's signal is visible; ProviderEvidence is
	// the signal.
	Provider, ProviderEvidence string
}

// PublicationStatus is what pg_publication and pg_publication_tables say of
// one publication.
type PublicationStatus struct {
	Exists bool
	// Insert, Update, Delete and Truncate are the operations it publishes.
	Insert, Update, Delete, Truncate bool
	// AllTables is FOR ALL TABLES; Tables then lists every table.
	AllTables bool
	// ViaRoot is publish_via_partition_root: a partitioned table's changes
	// are published as the root's, and Tables lists the root, not its
	// partitions.
	ViaRoot bool
	// Tables are the tables it covers, as pg_publication_tables lists them.
	Tables []schema.Table
}

// InsertsOnly reports whether the publication publishes inserts and
// nothing else, as walrelay wants it.
func (p PublicationStatus) InsertsOnly() bool {
	return p.Insert && !p.Update && !p.Delete && !p.Truncate
}

// Covers reports whether t is one of the publication's tables.
func (p PublicationStatus) Covers(t schema.Table) bool {
	for _, pt := range p.Tables {
		if pt == t {
			return true
		}
	}
	return false
}

// Connect opens a normal (non-replication) connection to cfg's database,
// for readings such as ReadStatus. The caller closes it. Its errors never
// quote the connection string.
func Connect(ctx context.Context, cfg Config) (*pgx.Conn, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return connect(ctx, &cfg)
}

// ReadStatus reads the status of slot name and of publication pub on conn:
// the slot's figures, the publication and the idle timeout, each read
// consistent in itself.
func ReadStatus(ctx context.Context, conn *pgx.Conn, name, pub string) (Status, error) {
	f, err := ReadFigures(ctx, conn, name)
	if err != nil {
		return Status{}, err
	}
	p, err := readPublication(ctx, conn, pub)
	if err != nil {
		return Status{}, err
	}
	st := Status{Figures: f, Publication: p}
	err = conn.QueryRow(ctx, "SELECT current_setting('idle_replication_slot_timeout', true)").Scan(&st.IdleTimeout)
	if err != nil {
		return Status{}, fmt.Errorf("read idle_replication_slot_timeout: %w", err)
	}
	if st.Provider, st.ProviderEvidence, err = DetectProvider(ctx, conn); err != nil {
		return Status{}, err
	}
	return st, nil
}
