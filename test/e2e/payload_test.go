package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// A text payload column holding JSON, NULL payloads as tombstones, and a
// headers column with entries that are no CloudEvents attributes: with
// --content-type application/json and --null-payload tombstone, every row
// arrives, in order, with its key and value (null for a NULL payload, empty
// for an empty one); the entries walrelay's rule refuses are left out,
// counted and logged once per key, and every record decodes with the
// CloudEvents SDK (ReadTopic's check).
func TestTombstonesContentTypeAndHeaderHygiene(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	ctx := context.Background()
	_, err := f.DB.Exec(ctx, "ALTER TABLE "+f.Table+" ALTER COLUMN payload DROP NOT NULL, ALTER COLUMN payload TYPE text USING payload::text")
	testkit.Must(t, err, "make the payload a nullable text column")
	metrics := testkit.FreePort(t)
	r := f.Start("--null-payload", "tombstone", "--content-type", "application/json", "--metrics-addr", metrics)
	r.WaitStarted()

	const badHeaders = `{"ce_Bad-Name": "x", "ce_datacontenttype": "text/plain", "ce_dataschema": "not a uri",
		"CE_ID": "forged", "ce_tenant": "acme", "tenant": "acme"}`
	insert := func(agg string, version int, payload, headers *string) {
		t.Helper()
		_, err := f.DB.Exec(ctx, "INSERT INTO "+f.Table+` (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload, headers)
			VALUES (gen_random_uuid(), 'order', $1, $2, 'order.changed.v1', $3, $4::jsonb)`, agg, version, payload, headers)
		testkit.Must(t, err, "insert %s v%d", agg, version)
	}
	str := func(s string) *string { return &s }
	bad, goodSchema := str(badHeaders), str(`{"ce_dataschema": "https://example.com/schemas/order.json"}`)
	for v := 1; v <= 20; v++ {
		switch {
		case v%5 == 0:
			insert("A", v, nil, nil) // a tombstone
		case v == 7:
			insert("A", v, str(""), goodSchema)
		default:
			insert("A", v, str(fmt.Sprintf(`{"v": %d}`, v)), bad)
		}
		insert("B", v, str(fmt.Sprintf(`{"b": %d}`, v)), nil)
	}
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)

	rows := f.OutboxRows()
	harness.AssertClean(t, f.VerifyAs(rows, harness.Expect{ContentType: "application/json"}), 0)
	tombstones, kept := 0, 0
	for _, rec := range f.ReadTopic(f.Topic("order")) {
		v := rec.Headers["aggregate_version"]
		switch {
		case rec.Key != nil && *rec.Key == "A" && (v == "5" || v == "10" || v == "15" || v == "20"):
			if rec.Payload != nil {
				t.Errorf("A v%s: value %q; want null", v, *rec.Payload)
			}
			if _, ok := rec.Headers["content-type"]; ok {
				t.Errorf("A v%s: a tombstone with content-type %q; want none", v, rec.Headers["content-type"])
			}
			tombstones++
		case rec.Key != nil && *rec.Key == "A" && v == "7":
			if rec.Payload == nil || *rec.Payload != "" || rec.Headers["ce_dataschema"] != "https://example.com/schemas/order.json" {
				t.Errorf("A v7: value %v, headers %v; want an empty value and the ce_dataschema", rec.Payload, rec.Headers)
			}
		case rec.Key != nil && *rec.Key == "A":
			for _, k := range []string{"ce_Bad-Name", "ce_datacontenttype", "ce_dataschema", "CE_ID"} {
				if _, ok := rec.Headers[k]; ok {
					t.Errorf("A v%s: header %s published; want it dropped", v, k)
				}
			}
			if rec.Headers["ce_tenant"] != "acme" || rec.Headers["tenant"] != "acme" || rec.Headers["content-type"] != "application/json" {
				t.Errorf("A v%s: headers %v; want ce_tenant and tenant kept, content-type application/json", v, rec.Headers)
			}
			kept++
		}
	}
	if tombstones != 4 || kept != 15 {
		t.Errorf("aggregate A: %d tombstones, %d records with the bad headers; want 4 and 15", tombstones, kept)
	}

	body := scrape(t, metrics)
	for _, want := range []string{
		`walrelay_headers_dropped_total{reason="invalid_name"} 15`,
		`walrelay_headers_dropped_total{reason="datacontenttype"} 15`,
		`walrelay_headers_dropped_total{reason="invalid_value"} 15`,
		`walrelay_headers_dropped_total{reason="reserved"} 15`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	lines := 0
	for _, line := range strings.Split(r.Stderr.String(), "\n") {
		if strings.Contains(line, "header of the headers column dropped") && strings.Contains(line, "ce_Bad-Name") {
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("%d log lines about ce_Bad-Name; want 1 (at most one a minute per key)", lines)
	}
	t.Logf("tombstones: 4 null values, no content-type; 15 records without the 4 refused headers each, 1 log line per key")
}
