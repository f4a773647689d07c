package decoder

import (
	"reflect"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

// The content type column gives each row its own content type, on the
// stream and by SQL alike: its value wins over Config.ContentType, which
// wins over the payload column type's; NULL and empty fall back; a value
// that is no media type makes a bad row naming the column; a tombstone has
// none; a table without the column reads as NULL.
func TestContentTypeColumn(t *testing.T) {
	const (
		avro  = "application/avro; charset=binary"
		given = "application/vnd.acme+json"
	)
	withCT := func(oid uint32) func([]pgoutputtest.Column) []pgoutputtest.Column {
		return func(c []pgoutputtest.Column) []pgoutputtest.Column {
			return append(c, pgoutputtest.Column{Name: "ContentType", OID: oid})
		}
	}
	tests := []struct {
		name    string
		cols    func([]pgoutputtest.Column) []pgoutputtest.Column
		cell    pgoutputtest.Cell
		payload pgoutputtest.Cell // zero: the fixture's
		cfg     Config
		want    string // the message's content type
		bad     string // the reason of a bad row
	}{
		{name: "the row's", cols: withCT(oidText), cell: text(avro), want: avro},
		{name: "the row's over the table's", cols: withCT(oidVarchar), cell: text(avro), cfg: Config{ContentType: given}, want: avro},
		{name: "null: the payload column's", cols: withCT(oidText), cell: null, want: contentJSON},
		{name: "empty: the table's", cols: withCT(oidText), cell: text(""), cfg: Config{ContentType: given}, want: given},
		{name: "no column: the table's", cols: func(c []pgoutputtest.Column) []pgoutputtest.Column { return c }, cfg: Config{ContentType: given}, want: given},
		{name: "tombstone", cols: withCT(oidText), cell: text(avro), payload: null, cfg: Config{NullPayload: NullPayloadTombstone}, want: ""},
		{name: "no media type", cols: withCT(oidText), cell: text("json"), bad: `"json" is not a media type like application/json`},
		{name: "structured mode", cols: withCT(oidText), cell: text("application/cloudevents+json"), bad: "is a CloudEvents structured-mode type"},
		{name: "control character", cols: withCT(oidText), cell: text("text/plain; x=\"a\x01b\""), bad: "is not a media type"},
		{name: "too long", cols: withCT(oidText), cell: text("text/" + strings.Repeat("x", MaxContentTypeBytes)), bad: "over the limit of 256"},
		{name: "a column of another type", cols: withCT(oidInt4), cell: text("1"), bad: "unsupported column type (oid 23)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.ContentTypeColumn = "ContentType"
			cols := tt.cols(outboxColumns())
			row := outboxRow()
			row["ContentType"] = tt.cell
			if tt.payload.Kind != 0 {
				row["payload"] = tt.payload
			}
			cells := rowFor(cols, row)
			streamed, bad, commit := decodeThirdInStream(t, cfg, cols, cells)
			r, err := NewRowDecoder(cfg, sqlColumns(cols))
			if err != nil {
				t.Fatalf("NewRowDecoder: %v", err)
			}
			read, readErr := r.Decode(sqlValues(t, cells), schema.Position{CommitLSN: finalLSN, Seq: 2}, commit)
			if tt.bad != "" {
				readBad, _ := AsBadRow(readErr)
				if bad == nil || !bad.ContentType || bad.Column != "ContentType" || !strings.Contains(bad.Reason, tt.bad) || !reflect.DeepEqual(readBad, bad) {
					t.Fatalf("stream: %+v, by SQL: %v; want a bad content type: %s", bad, readErr, tt.bad)
				}
				if want := `column "ContentType" (content type): `; !strings.Contains(bad.Error(), want) {
					t.Errorf("bad row %q; want it to say %q", bad.Error(), want)
				}
				return
			}
			if bad != nil || readErr != nil {
				t.Fatalf("stream: %v, by SQL: %v; want a message", bad, readErr)
			}
			for way, m := range map[string]*schema.Message{"stream": streamed, "SQL": read} {
				if m.ContentType != tt.want {
					t.Errorf("%s: content type %q; want %q", way, m.ContentType, tt.want)
				}
			}
		})
	}
}

// CheckColumns judges the content type column's type: text types only.
func TestCheckColumnsJudgesTheContentTypeColumn(t *testing.T) {
	cfg := Config{ContentTypeColumn: "ct"}
	cols := append(sqlColumns(outboxColumns()), Column{Name: "ct", Type: oidJSONB, TypeName: "jsonb"})
	e := CheckColumns(cfg, cols)
	if e == nil {
		t.Fatal("CheckColumns of a jsonb content type column: nil; want a *ColumnError")
	}
	wantFound := `column "ct" (content type) of public.outbox_messages has type jsonb; a content type column is text, varchar, char or name`
	wantFix := "set decoder.Config.ContentTypeColumn to a column of one of those types, or change the column's type"
	if e.Found() != wantFound || e.Fix() != wantFix {
		t.Errorf("CheckColumns: %q; %q\nwant %q; %q", e.Found(), e.Fix(), wantFound, wantFix)
	}
	cols[len(cols)-1] = Column{Name: "ct", Type: oidVarchar}
	if e := CheckColumns(cfg, cols); e != nil {
		t.Errorf("CheckColumns of a varchar content type column: %v; want nil", e)
	}
	if e := CheckColumns(cfg, cols[:len(cols)-1]); e != nil {
		t.Errorf("CheckColumns without the content type column: %v; want nil (it is optional)", e)
	}
}

func TestContentTypeColumnIsValidated(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{ContentTypeColumn: "payload"}, `decoder.Config.ContentTypeColumn: column "payload" is configured for both the content type and payload`},
		{Config{ContentTypeColumn: "ct", SpanContextColumn: "ct"}, `column "ct" is configured for both the span context and the content type`},
		{Config{ContentTypeColumn: "a\x00b"}, "decoder.Config.ContentTypeColumn: "},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v): %v; want an error saying %q", tc.cfg, err, tc.want)
		}
	}
}
