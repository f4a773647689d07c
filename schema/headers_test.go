package schema

import "testing"

func TestCheckHeader(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       HeaderDrop
	}{
		{"tenant", "acme", ""},
		{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ""},
		{"Ce-Not-Ours", "x", ""}, // not the ce_ prefix: an ordinary header
		{"ce_tenant", "acme", ""},
		{"ce_a1b2", "", ""},
		{"ce_abcdefghijklmnopqrst", "x", ""}, // 20 characters
		{"ce_dataschema", "https://example.com/schemas/order.json", ""},
		{"ce_dataschema", "urn:example:order:v1", ""},
		{"ce_id", "x", DropReserved},
		{"CE_ID", "x", DropReserved},
		{"ce_time", "2026-12-04T09:00:00Z", DropReserved},
		{"Content-Type", "text/plain", DropReserved},
		{"aggregate_type", "order", DropReserved},
		{"AGGREGATE_VERSION", "1", DropReserved},
		{"walrelay_source", "1/db/slot", DropReserved},
		{"Walrelay_Position", "tli=1 lsn=0/1 seq=0 partitions=1", DropReserved},
		{"ce_Bad-Name", "x", DropInvalidName},
		{"ce_badname!", "x", DropInvalidName},
		{"ce_Tenant", "x", DropInvalidName},
		{"CE_tenant", "x", DropInvalidName},
		{"Ce_tenant", "x", DropInvalidName},
		{"ce_", "x", DropInvalidName},
		{"ce_abcdefghijklmnopqrstu", "x", DropInvalidName}, // 21 characters
		{"ce_trace_id", "x", DropInvalidName},
		{"ce_data", "x", DropInvalidName},
		{"ce_datacontenttype", "application/json", DropDataContentType},
		{"ce_dataschema", "not a uri", DropInvalidValue},
		{"ce_dataschema", "/schemas/order.json", DropInvalidValue},
		{"ce_dataschema", "", DropInvalidValue},
		{"ce_dataschema", " https://example.com/s", DropInvalidValue},
		{"ce_dataschema", "http://[::1", DropInvalidValue},
	} {
		if got := CheckHeader(tc.key, tc.value); got != tc.want {
			t.Errorf("CheckHeader(%q, %q) = %q; want %q", tc.key, tc.value, got, tc.want)
		}
	}
}

func TestHeaderDropExplain(t *testing.T) {
	for _, d := range HeaderDrops {
		if e := d.Explain(); e == "" || e == string(d) {
			t.Errorf("%q.Explain() = %q; want words", d, e)
		}
	}
}

func TestCheckHeaderAlso(t *testing.T) {
	for _, tc := range []struct {
		key  string
		also []string
		want HeaderDrop
	}{
		{"id", nil, ""},
		{"id", []string{"id"}, DropReserved},
		{"ID", []string{"id"}, DropReserved},
		{"ids", []string{"id"}, ""},
		{"ce_id", []string{"id"}, DropReserved},
	} {
		if got := CheckHeader(tc.key, "x", tc.also...); got != tc.want {
			t.Errorf("CheckHeader(%q, x, %q) = %q; want %q", tc.key, tc.also, got, tc.want)
		}
	}
}
