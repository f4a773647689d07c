package smtpsink

import (
	"errors"
	"net"
	"net/smtp"
	"net/textproto"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T, c Config) *Server {
	t.Helper()
	s, err := StartConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) //nolint:errcheck // a second Close is a no-op
	return s
}

func TestSendMailStoresEnvelopeDataAndHeaders(t *testing.T) {
	seen := make(chan Mail, 10)
	s := start(t, Config{OnMail: func(m Mail) { seen <- m }})
	msg := "From: orders@example.com\r\n" +
		"To: a@example.com, b@example.com\r\n" +
		"Subject: =?utf-8?q?Commande_confirm=C3=A9e?=\r\n" +
		"Message-ID: <abc123@notifier.example>\r\n" +
		"\r\n" +
		"first line\r\n" +
		".a line that starts with a dot\r\n" +
		"..two dots\r\n" +
		"last line\r\n"
	err := smtp.SendMail(s.Addr(), nil, "orders@example.com", []string{"a@example.com", "b@example.com"}, []byte(msg))
	if err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	mails := s.Mails()
	if len(mails) != 1 {
		t.Fatalf("mails stored = %d; want 1", len(mails))
	}
	m := mails[0]
	if m.From != "orders@example.com" {
		t.Errorf("From = %q; want orders@example.com", m.From)
	}
	if want := []string{"a@example.com", "b@example.com"}; !reflect.DeepEqual(m.To, want) {
		t.Errorf("To = %q; want %q", m.To, want)
	}
	// net/smtp dot-stuffs the lines that start with a dot; the sink undoes it.
	if string(m.Data) != msg {
		t.Errorf("Data =\n%q\nwant\n%q", m.Data, msg)
	}
	if m.MessageID != "<abc123@notifier.example>" {
		t.Errorf("MessageID = %q; want <abc123@notifier.example>", m.MessageID)
	}
	if m.Subject != "Commande confirmée" {
		t.Errorf("Subject = %q; want the decoded %q", m.Subject, "Commande confirmée")
	}
	if got := <-seen; got.MessageID != m.MessageID || len(seen) != 0 {
		t.Errorf("OnMail saw %q and %d more; want the one stored", got.MessageID, len(seen))
	}
}

func TestSeveralMailsOnSeveralConnections(t *testing.T) {
	s := start(t, Config{})
	for _, id := range []string{"<1@x>", "<2@x>", "<3@x>"} {
		msg := "Message-ID: " + id + "\r\nSubject: s\r\n\r\nbody\r\n"
		if err := smtp.SendMail(s.Addr(), nil, "", []string{"c@example.com"}, []byte(msg)); err != nil {
			t.Fatalf("SendMail %s: %v", id, err)
		}
	}
	var ids []string
	for _, m := range s.Mails() {
		ids = append(ids, m.MessageID)
		if m.From != "" {
			t.Errorf("From = %q; want the null sender", m.From)
		}
	}
	if want := []string{"<1@x>", "<2@x>", "<3@x>"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("Message-IDs = %q; want %q", ids, want)
	}
}

// A closed sink is a mail server that is down: connections are refused.
// A new sink on the same address takes mail again.
func TestCloseRefusesThenRestartOnTheSameAddress(t *testing.T) {
	s := start(t, Config{})
	addr := s.Addr()
	send := func() error {
		return smtp.SendMail(addr, nil, "a@example.com", []string{"b@example.com"}, []byte("Subject: x\r\n\r\ny\r\n"))
	}
	if err := send(); err != nil {
		t.Fatalf("SendMail before Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := send(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("SendMail after Close: %v; want connection refused", err)
	}
	if got := len(s.Mails()); got != 1 {
		t.Errorf("mails of the closed sink = %d; want 1", got)
	}
	s2 := start(t, Config{Addr: addr})
	if err := send(); err != nil {
		t.Fatalf("SendMail to the restarted sink: %v", err)
	}
	if got := len(s2.Mails()); got != 1 {
		t.Errorf("mails of the restarted sink = %d; want 1", got)
	}
}

// dial opens a raw conversation and reads the greeting.
func dial(t *testing.T, s *Server) *textproto.Conn {
	t.Helper()
	c, err := textproto.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	expect(t, c, 220)
	return c
}

// expect reads one reply and checks its code.
func expect(t *testing.T, c *textproto.Conn, code int) string {
	t.Helper()
	got, msg, err := c.ReadResponse(0)
	if err != nil && got == 0 {
		t.Fatalf("read reply: %v", err)
	}
	if got != code {
		t.Fatalf("reply %d %q; want %d", got, msg, code)
	}
	return msg
}

// say sends a command and checks the reply's code.
func say(t *testing.T, c *textproto.Conn, cmd string, code int) string {
	t.Helper()
	if err := c.PrintfLine("%s", cmd); err != nil {
		t.Fatal(err)
	}
	return expect(t, c, code)
}

func TestCommandSequence(t *testing.T) {
	s := start(t, Config{})
	c := dial(t, s)
	say(t, c, "MAIL FROM:<a@example.com>", 503) // before EHLO
	say(t, c, "EHLO", 501)
	ehlo := say(t, c, "EHLO client.example", 250)
	if strings.Contains(ehlo, "STARTTLS") || strings.Contains(ehlo, "AUTH") {
		t.Errorf("EHLO reply %q advertises STARTTLS or AUTH", ehlo)
	}
	say(t, c, "RCPT TO:<b@example.com>", 503) // before MAIL
	say(t, c, "DATA", 503)                    // before RCPT
	say(t, c, "MAIL FROM:<a@example.com> BODY=8BITMIME", 250)
	say(t, c, "MAIL FROM:<a@example.com>", 503) // nested
	say(t, c, "DATA", 503)                      // still no RCPT
	say(t, c, "RCPT TO:<b@example.com>", 250)
	say(t, c, "RSET", 250)
	say(t, c, "DATA", 503) // RSET dropped the transaction
	say(t, c, "NOOP", 250)
	say(t, c, "HELP", 502)
	say(t, c, "HELO client.example", 250)
	say(t, c, "mail from:<a@example.com>", 250)
	say(t, c, "rcpt to:<b@example.com>", 250)
	say(t, c, "DATA", 354)
	for _, l := range []string{"Subject: raw", "", "..", "."} {
		if err := c.PrintfLine("%s", l); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, c, 250)
	say(t, c, "QUIT", 221)
	mails := s.Mails()
	if len(mails) != 1 {
		t.Fatalf("mails = %d; want 1", len(mails))
	}
	if want := "Subject: raw\r\n\r\n.\r\n"; string(mails[0].Data) != want {
		t.Errorf("Data = %q; want %q", mails[0].Data, want)
	}
}

func TestTooBigAndCutMessagesAreNotStored(t *testing.T) {
	s := start(t, Config{MaxMessageBytes: 64})
	c := dial(t, s)
	say(t, c, "HELO x", 250)
	say(t, c, "MAIL FROM:<a@example.com>", 250)
	say(t, c, "RCPT TO:<b@example.com>", 250)
	say(t, c, "DATA", 354)
	for _, l := range []string{"Subject: big", "", strings.Repeat("x", 100), "."} {
		if err := c.PrintfLine("%s", l); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, c, 552)
	say(t, c, "MAIL FROM:<a@example.com>", 250)
	say(t, c, "RCPT TO:<b@example.com>", 250)
	say(t, c, "DATA", 354)
	if err := c.PrintfLine("Subject: cut"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The session ends with the cut connection; Close waits for it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(s.Mails()); got != 0 {
		t.Errorf("mails = %d; want 0", got)
	}
}

// Close cuts idle connections instead of waiting for their clients.
func TestCloseCutsOpenConnections(t *testing.T) {
	s := start(t, Config{})
	c := dial(t, s)
	say(t, c, "EHLO x", 250)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s with a client connected")
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("dial after Close succeeded; want refused")
	}
}
