package smtpsink

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// maxCommandLine bounds a command line; RFC 5321 asks for 512 octets at
// least, and a line longer than this ends the connection.
const maxCommandLine = 4096

// session is one client connection: one goroutine owns it.
type session struct {
	srv  *Server
	conn net.Conn
	r    *bufio.Reader
	w    *textproto.Writer

	greeted bool     // EHLO or HELO seen
	inMail  bool     // MAIL FROM seen, transaction open
	from    string   // envelope sender of the open transaction
	to      []string // its recipients
}

func newSession(srv *Server, conn net.Conn) *session {
	return &session{
		srv:  srv,
		conn: conn,
		r:    bufio.NewReaderSize(conn, maxCommandLine),
		w:    textproto.NewWriter(bufio.NewWriter(conn)),
	}
}

// serve answers commands until QUIT, an error or the server's Close.
func (ss *session) serve() {
	if !ss.reply(220, ss.srv.cfg.Hostname+" ESMTP smtpsink ready") {
		return
	}
	for {
		line, err := ss.readLine()
		if errors.Is(err, bufio.ErrBufferFull) {
			ss.reply(500, "5.5.2 line too long")
			return
		}
		if err != nil {
			return
		}
		if !ss.command(line) {
			return
		}
	}
}

// command runs one command line; false ends the session.
func (ss *session) command(line string) bool {
	verb, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch strings.ToUpper(verb) {
	case "EHLO":
		return ss.hello(arg, true)
	case "HELO":
		return ss.hello(arg, false)
	case "MAIL":
		return ss.mail(arg)
	case "RCPT":
		return ss.rcpt(arg)
	case "DATA":
		return ss.data(arg)
	case "RSET":
		ss.reset()
		return ss.reply(250, "2.0.0 OK")
	case "NOOP":
		return ss.reply(250, "2.0.0 OK")
	case "QUIT":
		ss.reply(221, "2.0.0 "+ss.srv.cfg.Hostname+" closing connection")
		return false
	case "VRFY":
		return ss.reply(252, "2.1.5 cannot verify, will accept")
	}
	return ss.reply(502, "5.5.2 command not implemented")
}

func (ss *session) hello(arg string, extended bool) bool {
	if arg == "" {
		return ss.reply(501, "5.5.4 a domain or address is required")
	}
	ss.reset()
	ss.greeted = true
	if !extended {
		return ss.reply(250, ss.srv.cfg.Hostname)
	}
	return ss.reply(250, ss.srv.cfg.Hostname+" greets "+arg, "8BITMIME")
}

func (ss *session) mail(arg string) bool {
	switch {
	case !ss.greeted:
		return ss.reply(503, "5.5.1 send EHLO or HELO first")
	case ss.inMail:
		return ss.reply(503, "5.5.1 nested MAIL command")
	}
	addr, ok := path(arg, "FROM:")
	if !ok {
		return ss.reply(501, "5.5.4 syntax: MAIL FROM:<address>")
	}
	ss.inMail, ss.from, ss.to = true, addr, nil
	return ss.reply(250, "2.1.0 OK")
}

func (ss *session) rcpt(arg string) bool {
	if !ss.inMail {
		return ss.reply(503, "5.5.1 need MAIL before RCPT")
	}
	addr, ok := path(arg, "TO:")
	if !ok || addr == "" {
		return ss.reply(501, "5.5.4 syntax: RCPT TO:<address>")
	}
	ss.to = append(ss.to, addr)
	return ss.reply(250, "2.1.5 OK")
}

func (ss *session) data(arg string) bool {
	switch {
	case arg != "":
		return ss.reply(501, "5.5.4 DATA takes no argument")
	case len(ss.to) == 0:
		return ss.reply(503, "5.5.1 need RCPT before DATA")
	}
	if !ss.reply(354, "end data with <CR><LF>.<CR><LF>") {
		return false
	}
	body, tooBig, err := ss.readData()
	if err != nil {
		return false // cut in the middle: nothing is stored
	}
	from, to := ss.from, ss.to
	ss.reset()
	if tooBig {
		return ss.reply(552, "5.3.4 message too big")
	}
	n := ss.srv.store(from, to, body)
	return ss.reply(250, "2.0.0 OK queued as "+strconv.Itoa(n))
}

func (ss *session) reset() { ss.inMail, ss.from, ss.to = false, "", nil }

// readData reads the message up to the line ".", undoing the dot-stuffing
// and ending every line with CRLF. Past MaxMessageBytes it keeps reading to
// the end but stores nothing more, and says so.
func (ss *session) readData() (body []byte, tooBig bool, err error) {
	var buf bytes.Buffer
	for {
		ss.deadline()
		line, err := ss.readDataLine()
		if err != nil {
			return nil, false, err
		}
		if line == "." {
			return buf.Bytes(), tooBig, nil
		}
		line = strings.TrimPrefix(line, ".")
		if buf.Len()+len(line)+2 > ss.srv.cfg.MaxMessageBytes {
			tooBig = true
			continue
		}
		buf.WriteString(line)
		buf.WriteString("\r\n")
	}
}

// readDataLine reads one line of any length, without its line ending.
func (ss *session) readDataLine() (string, error) {
	var line []byte
	for {
		chunk, err := ss.r.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return "", err
		}
		return trimEOL(line), nil
	}
}

// readLine reads a command line, at most maxCommandLine bytes.
func (ss *session) readLine() (string, error) {
	ss.deadline()
	line, err := ss.r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	return trimEOL(line), nil
}

func (ss *session) deadline() {
	ss.conn.SetDeadline(time.Now().Add(ss.srv.cfg.IdleTimeout)) //nolint:errcheck // a closed conn fails the next read anyway
}

// reply sends code with one line of text, or several (a multiline reply);
// false when the client is gone.
func (ss *session) reply(code int, lines ...string) bool {
	for i, l := range lines {
		sep := " "
		if i < len(lines)-1 {
			sep = "-"
		}
		if err := ss.w.PrintfLine("%d%s%s", code, sep, l); err != nil {
			return false
		}
	}
	return true
}

// path reads "FROM:<addr> params" (or without the brackets) after the
// keyword kw; the null path <> gives "".
func path(arg, kw string) (string, bool) {
	if len(arg) < len(kw) || !strings.EqualFold(arg[:len(kw)], kw) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(kw):])
	if !strings.HasPrefix(rest, "<") {
		addr, _, _ := strings.Cut(rest, " ")
		return addr, addr != ""
	}
	end := strings.IndexByte(rest, '>')
	if end < 0 {
		return "", false
	}
	return rest[1:end], true
}

func trimEOL(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return string(bytes.TrimSuffix(b, []byte("\r")))
}
