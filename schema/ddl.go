package schema

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed outbox.sql.tmpl
var ddlText string

var ddlTemplate = template.Must(template.New("outbox.sql").Parse(ddlText))

// Config names the objects of the outbox contract in one database.
type Config struct {
	// Table is the outbox table. Defaults to public.outbox_messages.
	Table Table
	// Publication is the insert-only publication covering Table alone.
	// Defaults to walrelay_outbox.
	Publication string
	// Columns maps the contract to the table. Defaults to DefaultColumns().
	Columns Columns
	// DeadLetters is the dead-letter table. Defaults to Table's name with
	// the suffix _dead_letters, in Table's schema.
	DeadLetters Table
}

// DeadLetterTable is c.DeadLetters, or its default beside the outbox table.
func (c Config) DeadLetterTable() Table {
	if c.DeadLetters.Name != "" {
		t := c.DeadLetters
		if t.Schema == "" {
			t.Schema = c.Table.Schema
		}
		return t
	}
	return Table{Schema: c.Table.Schema, Name: c.Table.Name + "_dead_letters"}
}

// DefaultConfig is the contract as `walrelay schema` prints it by default.
func DefaultConfig() Config {
	return Config{
		Table:       Table{Schema: "public", Name: "outbox_messages"},
		Publication: "walrelay_outbox",
		Columns:     DefaultColumns(),
	}
}

// Validate checks every name that goes into SQL.
func (c Config) Validate() error {
	if err := ValidateIdentifier("table schema", c.Table.Schema); err != nil {
		return err
	}
	if err := ValidateIdentifier("table", c.Table.Name); err != nil {
		return err
	}
	if err := ValidateIdentifier("publication", c.Publication); err != nil {
		return err
	}
	dl := c.DeadLetterTable()
	if err := ValidateIdentifier("dead-letter table schema", dl.Schema); err != nil {
		return err
	}
	if err := ValidateIdentifier("dead-letter table", dl.Name); err != nil {
		return err
	}
	if dl == c.Table {
		return fmt.Errorf("the dead-letter table must not be the outbox table %s", c.Table)
	}
	return c.Columns.Validate()
}

// DDL is the SQL that creates the outbox table, its publication and the
// dead-letter table, for
// `walrelay schema` and for applications' migrations. Running it twice is
// safe for the table (IF NOT EXISTS); CREATE PUBLICATION has no such clause,
// so it is wrapped in a check.
func DDL(c Config) (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	q := func(s string) string { return QuoteIdentifier(s) }
	data := map[string]string{
		"Table":            c.Table.Quoted(),
		"TableName":        c.Table.String(),
		"Publication":      q(c.Publication),
		"PublicationName":  c.Publication,
		"MessageID":        q(c.Columns.MessageID),
		"AggregateType":    q(c.Columns.AggregateType),
		"AggregateID":      q(c.Columns.AggregateID),
		"AggregateVersion": q(c.Columns.AggregateVersion),
		"Type":             q(c.Columns.Type),
		"Payload":          q(c.Columns.Payload),
		"Headers":          q(c.Columns.Headers),
		"OccurredAt":       q(c.Columns.OccurredAt),
		"Topic":            q(c.Columns.Topic),
		"DeadLetters":      c.DeadLetterTable().Quoted(),
		"DeadLettersIndex": q(c.DeadLetterTable().Name + "_parked"),
	}
	var b strings.Builder
	if err := ddlTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render ddl: %w", err)
	}
	return b.String(), nil
}

// CreatePublicationSQL creates the insert-only publication for the outbox
// table alone. Names must have been validated.
func CreatePublicationSQL(c Config) string {
	return fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')",
		QuoteIdentifier(c.Publication), c.Table.Quoted())
}
