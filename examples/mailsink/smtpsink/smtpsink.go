// Package smtpsink is a minimal SMTP server that keeps every message it is
// given, for the example services' tests and demo: the notifier's fault
// test counts the e-mails it received and their Message-IDs.
//
// It speaks the plain core of SMTP (RFC 5321): the 220 greeting, EHLO or
// HELO, MAIL FROM, RCPT TO, DATA (with dot-unstuffing), RSET, NOOP and QUIT.
// It offers neither STARTTLS nor AUTH, relays nothing and accepts every
// address. A closed Server refuses connections like a mail server that is
// down; a new one can be started on the same address later.
package smtpsink

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"sync"
	"time"
)

// Mail is one message the sink accepted.
type Mail struct {
	// From is the envelope sender (MAIL FROM), without the angle brackets;
	// empty for the null sender <>.
	From string
	// To are the envelope recipients (RCPT TO), in order.
	To []string
	// Data is the message as sent after DATA, dot-unstuffed, with its CRLF
	// line endings, without the terminating ".".
	Data []byte
	// MessageID and Subject are the message's headers, read with net/mail;
	// empty when absent or when the message does not parse.
	MessageID string
	Subject   string
	// Received is when the sink stored it.
	Received time.Time
}

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on. Defaults to 127.0.0.1:0 (a free
	// port; Server.Addr tells which).
	Addr string
	// Hostname names the server in its replies. Defaults to "smtpsink".
	Hostname string
	// MaxMessageBytes refuses (552) a message whose data is larger. Defaults
	// to 10 MiB.
	MaxMessageBytes int
	// IdleTimeout closes a connection that sends no command (or no data
	// line) for that long. Defaults to 1 minute.
	IdleTimeout time.Duration
	// OnMail, when set, is called with each mail once it is stored, from the
	// connection's goroutine, before the client hears 250.
	OnMail func(Mail)
}

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Hostname == "" {
		c.Hostname = "smtpsink"
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 10 << 20
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = time.Minute
	}
}

// Server is a running sink. Its methods are safe for concurrent use.
type Server struct {
	cfg Config
	ln  net.Listener
	wg  sync.WaitGroup // the accept loop and one per connection

	mu     sync.Mutex
	mails  []Mail
	conns  map[net.Conn]struct{}
	closed bool
}

// Start listens on addr (see Config.Addr) and serves until Close.
func Start(addr string) (*Server, error) {
	return StartConfig(Config{Addr: addr})
}

// StartConfig listens on c.Addr and serves until Close.
func StartConfig(c Config) (*Server, error) {
	c.defaults()
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("smtp sink: listen on %s: %w", c.Addr, err)
	}
	s := &Server{cfg: c, ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the sink listens on, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Mails returns a copy of the mails stored so far, in the order they were
// accepted. It still answers after Close.
func (s *Server) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Close stops listening, cuts every open connection (a message whose data
// was not complete is not stored) and waits for the server's goroutines.
// The address is free again when Close returns. A second Close is a no-op.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close() //nolint:errcheck // cutting it is the point
	}
	s.mu.Unlock()
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("smtp sink: close listener: %w", err)
	}
	return nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		if !s.track(conn) {
			conn.Close() //nolint:errcheck // the server is closing
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(conn)
			newSession(s, conn).serve()
		}()
	}
}

// track registers conn so that Close can cut it; false once closed.
func (s *Server) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[conn] = struct{}{}
	return true
}

func (s *Server) untrack(conn net.Conn) {
	s.mu.Lock()
	delete(s.conns, conn)
	s.mu.Unlock()
	conn.Close() //nolint:errcheck // done with it either way
}

// store keeps one mail and returns its number (1, 2, ...).
func (s *Server) store(from string, to []string, data []byte) int {
	m := Mail{From: from, To: to, Data: data, Received: time.Now()}
	if msg, err := mail.ReadMessage(bytes.NewReader(data)); err == nil {
		m.MessageID = msg.Header.Get("Message-Id")
		m.Subject = msg.Header.Get("Subject")
		if dec, err := new(mime.WordDecoder).DecodeHeader(m.Subject); err == nil {
			m.Subject = dec
		}
	}
	s.mu.Lock()
	s.mails = append(s.mails, m)
	n := len(s.mails)
	s.mu.Unlock()
	if s.cfg.OnMail != nil {
		s.cfg.OnMail(m)
	}
	return n
}
