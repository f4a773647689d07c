package main

import (
	"io"
	"mime"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/examples/orderevents"
)

func TestMessageIDDependsOnlyOnTheTaskKey(t *testing.T) {
	a, b := messageID(taskKey("o-1")), messageID(taskKey("o-1"))
	if a != b {
		t.Fatalf("messageID differs for one key: %q, %q", a, b)
	}
	if c := messageID(taskKey("o-2")); c == a {
		t.Fatalf("messageID of two orders = %q both", a)
	}
	if ok := regexp.MustCompile(`^<[0-9a-f]{32}@notifier\.walrelay\.example>$`).MatchString(a); !ok {
		t.Fatalf("messageID = %q; want <32 hex digits@notifier.walrelay.example>", a)
	}
	// Parsable as a msg-id by net/mail (RFC 5322).
	if _, err := mail.ParseAddress("x " + a); err != nil {
		t.Errorf("messageID %q does not parse as an angle address: %v", a, err)
	}
}

func TestConfirmation(t *testing.T) {
	ok := orderevents.Submitted{
		OrderID: "o-7", CustomerEmail: "Ada Lovelace <ada@example.com>",
		Items:       []orderevents.Item{{SKU: "sku-1", Quantity: 2}, {SKU: "sku-2", Quantity: 1}},
		SubmittedAt: time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC),
	}
	tk, err := confirmation(ok)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Key != "order-confirmation/o-7" || tk.OrderID != "o-7" || tk.Recipient != "ada@example.com" {
		t.Errorf("task = %+v; want key order-confirmation/o-7, order o-7, recipient ada@example.com", tk)
	}
	for _, want := range []string{"o-7", "2 x sku-1", "1 x sku-2", "1 March 2026, 10:30 UTC"} {
		if !strings.Contains(tk.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, tk.Body)
		}
	}
	for name, s := range map[string]orderevents.Submitted{
		"no order id":   {CustomerEmail: "a@example.com"},
		"blank id":      {OrderID: "  ", CustomerEmail: "a@example.com"},
		"no address":    {OrderID: "o-1"},
		"bad address":   {OrderID: "o-1", CustomerEmail: "not an address"},
		"header inject": {OrderID: "o-1", CustomerEmail: "a@example.com\r\nBcc: b@example.com"},
	} {
		if _, err := confirmation(s); err == nil {
			t.Errorf("%s: confirmation(%+v) succeeded; want an error", name, s)
		}
	}
}

func TestComposeIsStableAndParses(t *testing.T) {
	created := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	tk := task{Key: taskKey("o-7"), OrderID: "o-7", Recipient: "ada@example.com",
		Subject: "Your order o-7 is confirmed\r\nBcc: evil@example.com", Body: "line 1\nline 2\r\n.\n", CreatedAt: created}
	from := &mail.Address{Name: "Shop", Address: "orders@example.com"}
	raw := compose(tk, from)
	if again := compose(tk, from); string(again) != string(raw) {
		t.Fatal("compose gave different bytes for one task")
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("read composed e-mail: %v\n%s", err, raw)
	}
	if got := msg.Header.Get("Message-Id"); got != messageID(tk.Key) {
		t.Errorf("Message-ID = %q; want %q", got, messageID(tk.Key))
	}
	if got, err := msg.Header.Date(); err != nil || !got.Equal(created) {
		t.Errorf("Date = %v (%v); want %v", got, err, created)
	}
	if got := msg.Header.Get("Bcc"); got != "" {
		t.Errorf("a CRLF in the subject made a Bcc header: %q", got)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || subject != tk.Subject {
		t.Errorf("Subject decodes to %q (%v); want %q", subject, err, tk.Subject)
	}
	if got := msg.Header.Get("To"); got != "<ada@example.com>" {
		t.Errorf("To = %q; want <ada@example.com>", got)
	}
	if got := msg.Header.Get("From"); got != `"Shop" <orders@example.com>` {
		t.Errorf("From = %q", got)
	}
	body, _ := io.ReadAll(msg.Body)
	if want := "line 1\r\nline 2\r\n.\r\n"; string(body) != want {
		t.Errorf("body = %q; want %q", body, want)
	}
}
