package main

import (
	"bytes"
	"context"
	"net"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/poll"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRunWritesEachMailAndLogsIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := filepath.Join(t.TempDir(), "mails")
	ctx, cancel := context.WithCancel(context.Background())
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", addr, "--dir", dir}, &logs) }()
	msg := "Message-ID: <m1@x>\r\nSubject: hello\r\n\r\nbody\r\n"
	poll.Until(10*time.Second, 20*time.Millisecond, func() bool {
		err = smtp.SendMail(addr, nil, "a@example.com", []string{"b@example.com"}, []byte(msg))
		return err == nil
	})
	if err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "1.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Errorf("1.eml = %q; want %q", got, msg)
	}
	if n := strings.Count(logs.String(), `"mail received"`); n != 1 {
		t.Errorf("%d \"mail received\" lines; want 1\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"message_id":"<m1@x>"`) {
		t.Errorf("log lacks the Message-ID:\n%s", logs.String())
	}
}
