package schema

import "fmt"

// Columns names the outbox table's columns. The zero value is not useful;
// start from DefaultColumns and override what differs in an existing table.
//
// Required columns (MessageID, AggregateType, AggregateID, Type, Payload)
// must exist in the table; AggregateType may be null in a row that sets
// Topic. The optional ones
// (AggregateVersion, Headers, OccurredAt, Topic) may be absent from it: a
// missing optional column reads as null.
type Columns struct {
	MessageID        string // Defaults to message_id (uuid; bigint and text columns work too).
	AggregateType    string // Defaults to aggregate_type (text).
	AggregateID      string // Defaults to aggregate_id (text, the Kafka key).
	AggregateVersion string // Defaults to aggregate_version (bigint).
	Type             string // Defaults to type (text).
	Payload          string // Defaults to payload (jsonb, json, text or bytea).
	Headers          string // Defaults to headers (jsonb object of strings).
	OccurredAt       string // Defaults to occurred_at (timestamptz).
	Topic            string // Defaults to topic (text, an explicit topic).
}

// DefaultColumns are the names used by the DDL of this package.
func DefaultColumns() Columns {
	return Columns{
		MessageID:        "message_id",
		AggregateType:    "aggregate_type",
		AggregateID:      "aggregate_id",
		AggregateVersion: "aggregate_version",
		Type:             "type",
		Payload:          "payload",
		Headers:          "headers",
		OccurredAt:       "occurred_at",
		Topic:            "topic",
	}
}

// Field identifies one column of the contract.
type Field int

// The fields of the outbox contract, in DDL order.
const (
	FieldMessageID Field = iota
	FieldAggregateType
	FieldAggregateID
	FieldAggregateVersion
	FieldType
	FieldPayload
	FieldHeaders
	FieldOccurredAt
	FieldTopic
	NumFields
)

var fieldNames = [NumFields]string{"message_id", "aggregate_type", "aggregate_id", "aggregate_version", "type", "payload", "headers", "occurred_at", "topic"}

// String is the field's default column name, used in error messages.
func (f Field) String() string {
	if f < 0 || f >= NumFields {
		return fmt.Sprintf("field(%d)", int(f))
	}
	return fieldNames[f]
}

var fieldSettings = [NumFields]string{"MessageID", "AggregateType", "AggregateID", "AggregateVersion", "Type", "Payload", "Headers", "OccurredAt", "Topic"}

// Setting names the field's column setting in errors and fixes
// ("schema.Columns.AggregateType"), so that a program with names of its
// own for the columns (walrelay's --column-* flags) can say them its way.
func (f Field) Setting() string {
	if f < 0 || f >= NumFields {
		return fmt.Sprintf("schema.Columns field(%d)", int(f))
	}
	return "schema.Columns." + fieldSettings[f]
}

// Names returns the configured column name of every field, indexed by Field.
func (c Columns) Names() [NumFields]string {
	return [NumFields]string{c.MessageID, c.AggregateType, c.AggregateID, c.AggregateVersion, c.Type, c.Payload, c.Headers, c.OccurredAt, c.Topic}
}

// Validate checks every name with ValidateIdentifier and that no two fields
// share a column.
func (c Columns) Validate() error {
	seen := map[string]Field{}
	for f, name := range c.Names() {
		if err := ValidateIdentifier(Field(f).String()+" column", name); err != nil {
			return err
		}
		if other, ok := seen[name]; ok {
			return fmt.Errorf("column %q is configured for both %s and %s", name, other, Field(f))
		}
		seen[name] = Field(f)
	}
	return nil
}
