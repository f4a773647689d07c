package retention

import (
	"errors"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// MinRetention is the shortest retention period a Pruner accepts: a shorter
// one is a mistake, not a policy.
const MinRetention = time.Minute

// Config says which rows to prune and how gently.
type Config struct {
	// Table is the outbox table. Required.
	Table schema.Table
	// OccurredAt is the column holding the event time. Defaults to
	// occurred_at.
	OccurredAt string
	// Slot is walrelay's replication slot, whose confirmed position decides
	// which rows were processed. Defaults to "walrelay".
	Slot string
	// Recoveries is the recoveries table (schema.Config.RecoveryTable):
	// while the slot's recovery is pending there, the rows it still needs
	// are kept. A missing table means none is pending. Defaults to Table's
	// name with _recoveries, in Table's schema.
	Recoveries schema.Table
	// Retention is how long rows are kept, measured from occurred_at on the
	// server's clock. Required, at least MinRetention.
	Retention time.Duration
	// Batch is how many rows one DELETE removes at most. Defaults to 1000.
	Batch int
	// Pause is the wait between two batches. Defaults to 100ms; negative
	// means none.
	Pause time.Duration
	// Wait bounds how long the pruner waits for the slot to pass the mark.
	// Defaults to 1m; negative means it looks once.
	Wait time.Duration
	// PollInterval is how often the slot is read while waiting. Defaults to
	// 1s.
	PollInterval time.Duration
	// DryRun counts the rows that would be deleted and deletes none.
	DryRun bool
	// DropPartitions drops the partitions of a table partitioned by RANGE
	// on OccurredAt whose whole range is older than the cutoff, once every
	// row in them is confirmed (see partitions.go); the other old rows are
	// deleted as ever.
	DropPartitions bool
}

func (c *Config) setDefaults() {
	if c.OccurredAt == "" {
		c.OccurredAt = schema.DefaultColumns().OccurredAt
	}
	if c.Slot == "" {
		c.Slot = "walrelay"
	}
	if c.Recoveries.Name == "" && c.Table.Name != "" {
		c.Recoveries = schema.Config{Table: c.Table}.RecoveryTable()
	}
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Pause == 0 {
		c.Pause = 100 * time.Millisecond
	}
	if c.Wait == 0 {
		c.Wait = time.Minute
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
}

func (c *Config) validate() error {
	for _, n := range []struct{ what, name string }{
		{"table schema", c.Table.Schema}, {"table", c.Table.Name}, {"occurred_at column", c.OccurredAt},
		{"recoveries table schema", c.Recoveries.Schema}, {"recoveries table", c.Recoveries.Name},
	} {
		if err := schema.ValidateIdentifier(n.what, n.name); err != nil {
			return err
		}
	}
	if err := schema.ValidateSlotName(c.Slot); err != nil {
		return err
	}
	switch {
	case c.Retention <= 0:
		return errors.New("the retention period is required")
	case c.Retention < MinRetention:
		return fmt.Errorf("the retention period %s is under %s", c.Retention, MinRetention)
	case c.Batch < 1:
		return fmt.Errorf("the batch size %d is not positive", c.Batch)
	}
	return nil
}

// Defaults is the Config with every optional field at its default.
func Defaults() Config {
	var c Config
	c.setDefaults()
	return c
}
