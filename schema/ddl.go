package schema

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
	"unicode/utf8"
)

var (
	//go:embed outbox.sql.tmpl
	outboxText string
	//go:embed existing.sql.tmpl
	existingText string
	//go:embed publication.sql.tmpl
	publicationText string
	//go:embed deadletters.sql.tmpl
	deadLettersText string
	//go:embed recoveries.sql.tmpl
	recoveriesText string
	//go:embed topics.sql.tmpl
	topicsText string
)

var (
	outboxTemplate      = template.Must(template.New("outbox.sql").Parse(outboxText))
	existingTemplate    = template.Must(template.New("existing.sql").Parse(existingText))
	publicationTemplate = template.Must(template.New("publication.sql").Parse(publicationText))
	deadLettersTemplate = template.Must(template.New("deadletters.sql").Parse(deadLettersText))
	recoveriesTemplate  = template.Must(template.New("recoveries.sql").Parse(recoveriesText))
	topicsTemplate      = template.Must(template.New("topics.sql").Parse(topicsText))
)

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

// SettingDeadLetters names the dead-letter table's setting in errors and
// fixes, so that a program with a name of its own for it can say it its
// way.
const SettingDeadLetters = "schema.Config.DeadLetters"

// SettingTable names the outbox table's setting in errors about the names
// derived from it.
const SettingTable = "schema.Config.Table"

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

// RecoveryTable is the table of pending and finished recoveries (`walrelay
// recover`), one row per slot: beside the dead-letter table, named after
// the outbox table with the suffix _recoveries. It has no setting of its
// own: --dead-letter-table moves it too.
func (c Config) RecoveryTable() Table {
	return Table{Schema: c.DeadLetterTable().Schema, Name: c.Table.Name + "_recoveries"}
}

// TopicsTable is the table of topic layouts (the partition count each
// topic's keys are routed by), beside the dead-letter table like the
// recoveries table, named after the outbox table with the suffix _topics.
func (c Config) TopicsTable() Table {
	return Table{Schema: c.DeadLetterTable().Schema, Name: c.Table.Name + "_topics"}
}

// occurredAtIndex names the outbox table's index on its occurred_at column,
// which `walrelay prune` uses: the table's name with _occurred_at, in the
// table's schema, cut to 63 bytes (fitName).
func (c Config) occurredAtIndex() string { return fitName(c.Table.Name + "_occurred_at") }

// deadLettersIndex names the dead-letter table's index of parked rows: its
// name with _parked, cut to 63 bytes (fitName).
func (c Config) deadLettersIndex() string { return fitName(c.DeadLetterTable().Name + "_parked") }

// fitName cuts an index name to 63 bytes at a character's start, as
// PostgreSQL would: the same name PostgreSQL gave the index when walrelay
// left the cutting to it, so that IF NOT EXISTS finds an index made by an
// earlier walrelay, and no NOTICE. The relay never uses an index by its
// name (prune looks for an index by its column), so a cut name harms
// nothing; two tables whose names share their first 50 bytes would share
// it, and the second then has no index, which prune warns about.
func fitName(name string) string {
	if len(name) <= maxIdentifierLen {
		return name
	}
	n := maxIdentifierLen
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return name[:n]
}

// DefaultConfig is the contract as `walrelay schema` prints it by default.
func DefaultConfig() Config {
	return Config{
		Table:       Table{Schema: "public", Name: "outbox_messages"},
		Publication: "walrelay_outbox",
		Columns:     DefaultColumns(),
	}
}

// Validate checks every name that goes into SQL, the derived ones too.
func (c Config) Validate() error {
	if err := c.Table.Validate("table"); err != nil {
		return err
	}
	if err := ValidateIdentifier("publication", c.Publication); err != nil {
		return err
	}
	dl := c.DeadLetterTable()
	if err := dl.Validate("dead-letter table"); err != nil {
		if c.DeadLetters.Name == "" {
			return fmt.Errorf("%w (the outbox table's name with _dead_letters: shorten %s, or set %s)", err, SettingTable, SettingDeadLetters)
		}
		return err
	}
	if dl == c.Table {
		return fmt.Errorf("the dead-letter table must not be the outbox table %s", c.Table)
	}
	if err := c.validateDerived(); err != nil {
		return err
	}
	return c.Columns.Validate()
}

// validateDerived checks the names of the recoveries and topics tables,
// which every verb uses by name (a name over 63 bytes PostgreSQL would cut,
// and walrelay would look for another table than the one it made), and
// that they are no other table of the contract.
func (c Config) validateDerived() error {
	dl := c.DeadLetterTable()
	for _, d := range []struct{ what, name, suffix string }{
		{"recoveries table", c.RecoveryTable().Name, "_recoveries"},
		{"topics table", c.TopicsTable().Name, "_topics"},
	} {
		if err := ValidateIdentifier(d.what, d.name); err != nil {
			return fmt.Errorf("%w (the outbox table's name with %s: shorten %s)", err, d.suffix, SettingTable)
		}
	}
	for _, d := range []struct {
		what string
		t    Table
	}{{"recoveries table", c.RecoveryTable()}, {"topics table", c.TopicsTable()}} {
		if d.t == dl {
			return fmt.Errorf("the dead-letter table must not be the %s %s", d.what, d.t)
		}
	}
	return nil
}

// DDL is the SQL that creates the outbox table, its index on occurred_at,
// its publication, the dead-letter table, the recoveries table and the
// topics table, for `walrelay schema` and for applications' migrations.
// Running it twice is safe for the tables (IF NOT EXISTS); CREATE
// PUBLICATION has no such clause, so it is wrapped in a check.
func DDL(c Config) (string, error) {
	return render(c, outboxTemplate, publicationTemplate, deadLettersTemplate, recoveriesTemplate, topicsTemplate)
}

// ExistingDDL is DDL for an outbox table that exists already (another
// tool's, or one made by hand): the publication, the dead-letter, recoveries
// and topics tables, and nothing that creates or changes the outbox table,
// whose columns need not be the defaults' (DDL's index on occurred_at would
// fail on a table without that column). Safe to run twice, like DDL.
func ExistingDDL(c Config) (string, error) {
	return render(c, existingTemplate, publicationTemplate, deadLettersTemplate, recoveriesTemplate, topicsTemplate)
}

// DeadLetterDDL is the part of DDL that creates the dead-letter table and
// its index, alone: `walrelay init` runs it. Safe to run twice.
func DeadLetterDDL(c Config) (string, error) {
	return render(c, deadLettersTemplate)
}

// RecoveryDDL is the part of DDL that creates the recoveries table, alone:
// `walrelay init` and `walrelay recover` run it. Safe to run twice.
func RecoveryDDL(c Config) (string, error) {
	return render(c, recoveriesTemplate)
}

// TopicsDDL is the part of DDL that creates the topics table, alone:
// `walrelay init` runs it. Safe to run twice.
func TopicsDDL(c Config) (string, error) {
	return render(c, topicsTemplate)
}

// render validates c and renders the templates one after the other,
// separated by a blank line.
func render(c Config, ts ...*template.Template) (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	data := templateData(c)
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString("\n")
		}
		if err := t.Execute(&b, data); err != nil {
			return "", fmt.Errorf("render %s: %w", t.Name(), err)
		}
	}
	return b.String(), nil
}

// templateData is every name the templates use, quoted where it goes into
// SQL as an identifier. c must have been validated.
func templateData(c Config) map[string]string {
	q := func(s string) string { return QuoteIdentifier(s) }
	return map[string]string{
		"Table":            c.Table.Quoted(),
		"Publication":      q(c.Publication),
		"PublicationText":  QuoteLiteral(c.Publication),
		"DoTag":            dollarTag(QuoteIdentifier(c.Publication), QuoteLiteral(c.Publication), c.Table.Quoted()),
		"MessageID":        q(c.Columns.MessageID),
		"AggregateType":    q(c.Columns.AggregateType),
		"AggregateID":      q(c.Columns.AggregateID),
		"AggregateVersion": q(c.Columns.AggregateVersion),
		"Type":             q(c.Columns.Type),
		"Payload":          q(c.Columns.Payload),
		"Headers":          q(c.Columns.Headers),
		"OccurredAt":       q(c.Columns.OccurredAt),
		"OccurredAtName":   commentName(c.Columns.OccurredAt),
		"OccurredAtIndex":  q(c.occurredAtIndex()),
		"Topic":            q(c.Columns.Topic),
		"DeadLetters":      c.DeadLetterTable().Quoted(),
		"DeadLettersIndex": q(c.deadLettersIndex()),
		"Recoveries":       c.RecoveryTable().Quoted(),
		"Topics":           c.TopicsTable().Quoted(),
	}
}

// dollarTag is the tag of a dollar-quoted body that holds the texts: a
// name holding $walrelay$ would end the body early and turn the rest of
// itself into SQL of its own, so the tag is one that none of them holds.
func dollarTag(texts ...string) string {
	all := strings.Join(texts, " ")
	tag := "$walrelay$"
	for i := 1; strings.Contains(all, tag); i++ {
		tag = fmt.Sprintf("$walrelay%d$", i)
	}
	return tag
}

// commentName is name for a -- comment: as messages show it, with line
// breaks (which would end the comment and make the rest SQL) written as
// \n and \r.
func commentName(name string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(displayName(name))
}

// CreatePublicationSQL creates the insert-only publication for the outbox
// table alone. publish_via_partition_root makes a partitioned outbox's
// rows arrive as the table's own, whichever partition holds them (and
// partitions attached later with them); it changes nothing for a plain
// table. Names must have been validated.
func CreatePublicationSQL(c Config) string { return CreatePublicationForSQL(c.Publication, c.Table) }

// CreatePublicationForSQL is CreatePublicationSQL for the outbox tables of
// one slot.
func CreatePublicationForSQL(publication string, tables ...Table) string {
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = t.Quoted()
	}
	return fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert', publish_via_partition_root = true)",
		QuoteIdentifier(publication), strings.Join(quoted, ", "))
}
