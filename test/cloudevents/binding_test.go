package cloudevents_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/cloudevents"
)

func headers(kv ...string) []cloudevents.Header {
	var hs []cloudevents.Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, cloudevents.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

// base are the headers walrelay sets on every record.
func base(extra ...string) []cloudevents.Header {
	return headers(append([]string{
		"ce_specversion", "1.0", "ce_id", "0192f1c2-7d3e-7a4b-9c5d-6e7f8091a2b3", "ce_type", "order.submitted.v1",
		"ce_source", "walrelay", "ce_subject", "order-42", "ce_time", "2026-12-04T09:00:00.123456Z",
		"aggregate_type", "order", "aggregate_version", "3",
	}, extra...)...)
}

func TestDecodeAWalrelayRecord(t *testing.T) {
	ev, err := cloudevents.Decode(base("content-type", "application/json", "traceparent", "00-abc-def-01", "ce_tenant", "acme"), []byte(`{"a":1}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if ev.ID() != "0192f1c2-7d3e-7a4b-9c5d-6e7f8091a2b3" || ev.Type() != "order.submitted.v1" || ev.Source() != "walrelay" ||
		ev.Subject() != "order-42" || ev.DataContentType() != "application/json" || string(ev.Data()) != `{"a":1}` ||
		!ev.Time().Equal(time.Date(2026, 12, 4, 9, 0, 0, 123456000, time.UTC)) || ev.Extensions()["tenant"] != "acme" {
		t.Errorf("event %s; want walrelay's attributes, the tenant extension and the data", ev)
	}
	if _, ok := ev.Extensions()["traceparent"]; ok {
		t.Error("traceparent, not a ce_ header, became an extension; want it ignored")
	}
}

// A tombstone, a null value without content-type, is an event without data.
func TestDecodeATombstone(t *testing.T) {
	ev, err := cloudevents.Decode(base(), nil)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if ev.Data() != nil || ev.DataContentType() != "" {
		t.Errorf("tombstone: data %q, datacontenttype %q; want neither", ev.Data(), ev.DataContentType())
	}
}

// What walrelay's header rule drops is what the SDK refuses; what it
// keeps, the SDK reads.
func TestDecodeRefusesWhatTheHeaderRuleDrops(t *testing.T) {
	for _, h := range [][2]string{
		{"ce_Bad-Name", "x"},
		{"ce_trace_id", "x"},
		{"ce_dataschema", "not a uri"},
		{"ce_dataschema", "/relative/schema.json"},
	} {
		if schema.CheckHeader(h[0], h[1]) == "" {
			t.Errorf("schema.CheckHeader(%q, %q) keeps it", h[0], h[1])
		}
		if _, err := cloudevents.Decode(base("content-type", "application/json", h[0], h[1]), []byte("{}")); err == nil {
			t.Errorf("Decode with %s: %q: no error; want the SDK to refuse it", h[0], h[1])
		}
	}
	for _, h := range [][2]string{{"ce_tenant", "acme"}, {"ce_dataschema", "https://example.com/order.json"}, {"ce_abcdefghijklmnopqrst", "x"}} {
		if d := schema.CheckHeader(h[0], h[1]); d != "" {
			t.Errorf("schema.CheckHeader(%q, %q) = %q; want it kept", h[0], h[1], d)
		}
		if _, err := cloudevents.Decode(base("content-type", "application/json", h[0], h[1]), []byte("{}")); err != nil {
			t.Errorf("Decode with %s: %q: %v; want it read", h[0], h[1], err)
		}
	}
}

func TestDecodeRefusesWhatIsNoBinaryModeEvent(t *testing.T) {
	for name, tc := range map[string]struct {
		hs   []cloudevents.Header
		want string
	}{
		"no specversion":  {headers("ce_id", "1", "ce_type", "t", "ce_source", "s"), "ce_specversion"},
		"unknown version": {headers("ce_specversion", "9.9", "ce_id", "1", "ce_type", "t", "ce_source", "s"), "ce_specversion"},
		"no id":           {headers("ce_specversion", "1.0", "ce_type", "t", "ce_source", "s"), "id"},
		"structured":      {base("content-type", "application/cloudevents+json"), "structured"},
		"repeated key":    {base("CE_TYPE", "other"), "twice"},
	} {
		if _, err := cloudevents.Decode(tc.hs, []byte("{}")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", name, err, tc.want)
		}
	}
}

// Headers as a kafka-go consumer hands them over decode too; an empty
// value is an event without data, as a null one is.
func TestDecodeKafkaGoHeaders(t *testing.T) {
	var hs []cloudevents.Header
	for _, h := range []kafka.Header{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte("x")},
		{Key: "ce_type", Value: []byte("t")}, {Key: "ce_source", Value: []byte("walrelay")}} {
		hs = append(hs, cloudevents.Header{Key: h.Key, Value: h.Value})
	}
	if ev, err := cloudevents.Decode(hs, []byte{}); err != nil || ev.Data() != nil {
		t.Errorf("Decode = %v, %v; want an event without data", ev, err)
	}
}

// The SDK is the tests' only: the walrelay binary does not link it.
func TestNotLinkedIntoWalrelay(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/cmd/walrelay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/cloudevents/") || pkg == "github.com/walrelay/walrelay/test/cloudevents" {
			t.Errorf("cmd/walrelay depends on %s; want the CloudEvents SDK in tests only", pkg)
		}
	}
}
