package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"time"

	"github.com/walrelay/walrelay/examples/orderevents"
)

// messageIDDomain is the right-hand side of every Message-ID the notifier
// writes.
const messageIDDomain = "notifier.walrelay.example"

// messageID is the e-mail's Message-ID, derived from the task key alone:
// every attempt at one task, by any instance, sends the same id, so that a
// resend after a crash between the send and its record is recognised by
// mail clients as the same e-mail.
func messageID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "<" + hex.EncodeToString(sum[:16]) + "@" + messageIDDomain + ">"
}

// confirmation turns an order.submitted.v1 payload into its e-mail task.
// An error means the order cannot get an e-mail at all (no order id, no
// valid address): retrying would not help.
func confirmation(s orderevents.Submitted) (task, error) {
	if strings.TrimSpace(s.OrderID) == "" {
		return task{}, errors.New("the order has no order_id")
	}
	to, err := mail.ParseAddress(s.CustomerEmail)
	if err != nil {
		return task{}, fmt.Errorf("customer_email %q: %w", s.CustomerEmail, err)
	}
	return task{
		Key:       taskKey(s.OrderID),
		OrderID:   s.OrderID,
		Recipient: to.Address,
		Subject:   "Your order " + s.OrderID + " is confirmed",
		Body:      confirmationBody(s),
	}, nil
}

func confirmationBody(s orderevents.Submitted) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Hello,\n\nthank you for your order %s", s.OrderID)
	if !s.SubmittedAt.IsZero() {
		fmt.Fprintf(&b, " of %s", s.SubmittedAt.UTC().Format("2 January 2006, 15:04 MST"))
	}
	b.WriteString(". We have received it and will ship:\n\n")
	for _, it := range s.Items {
		fmt.Fprintf(&b, "  %d x %s\n", it.Quantity, it.SKU)
	}
	b.WriteString("\nThe shop\n")
	return b.String()
}

// compose writes the whole e-mail with CRLF line endings. It depends only
// on the task and the sender, so every attempt sends the same bytes.
func compose(t task, from *mail.Address) []byte {
	var b strings.Builder
	header := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	header("Message-ID", messageID(t.Key))
	header("Date", t.CreatedAt.UTC().Format(time.RFC1123Z))
	header("From", from.String())
	header("To", (&mail.Address{Address: t.Recipient}).String())
	// Q-encoding also encodes CR and LF: nothing in the subject can start
	// a header of its own.
	header("Subject", mime.QEncoding.Encode("utf-8", t.Subject))
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	body := strings.ReplaceAll(t.Body, "\r\n", "\n")
	b.WriteString(strings.ReplaceAll(body, "\n", "\r\n"))
	return []byte(b.String())
}
