package schema

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

var (
	//go:embed inbox.sql.tmpl
	inboxText     string
	inboxTemplate = template.Must(template.New("inbox.sql").Parse(inboxText))
)

// InboxIndexName is the name of the inbox table's (consumer_id,
// processed_at) index, which the prune uses: the table's name with the
// suffix _processed, in the table's schema.
func InboxIndexName(inbox Table) string { return inbox.Name + "_processed" }

// InboxDDL is the SQL that creates a consumer's inbox table (keyed by
// consumer_id and message_id, with the index the prune uses) and its table
// of aggregate versions (package inbox). Every name is validated and
// quoted; running the SQL twice is safe (IF NOT EXISTS).
func InboxDDL(inbox, versions Table) (string, error) {
	if err := validateTable("inbox", inbox); err != nil {
		return "", err
	}
	if err := ValidateIdentifier("inbox index", InboxIndexName(inbox)); err != nil {
		return "", err
	}
	if err := validateTable("versions", versions); err != nil {
		return "", err
	}
	if inbox == versions {
		return "", fmt.Errorf("the versions table must not be the inbox table %s", inbox)
	}
	var b strings.Builder
	err := inboxTemplate.Execute(&b, map[string]string{
		"Inbox":      inbox.Quoted(),
		"InboxIndex": QuoteIdentifier(InboxIndexName(inbox)),
		"Versions":   versions.Quoted(),
	})
	if err != nil {
		return "", fmt.Errorf("render %s: %w", inboxTemplate.Name(), err)
	}
	return b.String(), nil
}

// validateTable validates both parts of t, a table of the given kind.
func validateTable(kind string, t Table) error {
	if err := ValidateIdentifier(kind+" table schema", t.Schema); err != nil {
		return err
	}
	return ValidateIdentifier(kind+" table", t.Name)
}
