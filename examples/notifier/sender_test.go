package main

import (
	"context"
	"net"
	"net/mail"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/examples/mailsink/smtpsink"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.Must(t, err, "listen")
	defer ln.Close()
	return ln.Addr().String()
}

// While the mail server is down the sender retries each task with a growing
// delay and records the error; once it is up, every e-mail goes out once.
func TestSenderRetriesWhileMailIsDownThenSends(t *testing.T) {
	pool, s := testTasks(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t)
	m, err := newMetrics(nil)
	testkit.Must(t, err, "metrics")
	snd := &sender{
		db: pool, tasks: s, log: zaptest.NewLogger(t), metrics: m,
		mailer:   &mailer{addr: addr, from: &mail.Address{Address: "orders@example.com"}, timeout: 2 * time.Second},
		retryMin: 50 * time.Millisecond, retryMax: 400 * time.Millisecond, poll: 20 * time.Millisecond, lease: 5 * time.Second,
	}
	const n = 3
	var keys []string
	for i := range n {
		tk := newTestTask("o-" + strconv.Itoa(i))
		keys = append(keys, tk.Key)
		_, err := s.insert(ctx, pool, tk)
		testkit.Must(t, err, "insert")
	}
	done := make(chan error, 1)
	go func() { done <- snd.Run(ctx) }()
	began := time.Now()
	poll.EventuallyTrue(t, 20*time.Second, "every task tried 4 times", func() bool {
		for _, k := range keys {
			if readTask(t, pool, s, k).attempts < 4 {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(began)
	// Least delays after attempts 1, 2, 3: 25 + 50 + 100 ms.
	if elapsed < 175*time.Millisecond {
		t.Errorf("4 attempts took %s; want at least 175ms of backoff", elapsed)
	}
	for _, k := range keys {
		r := readTask(t, pool, s, k)
		if r.status != "pending" || r.lastError == nil {
			t.Fatalf("task %s while mail is down: %+v; want pending with last_error", k, r)
		}
	}
	sink, err := smtpsink.Start(addr)
	testkit.Must(t, err, "start the sink")
	defer sink.Close()
	poll.EventuallyTrue(t, 20*time.Second, "every task sent", func() bool {
		for _, k := range keys {
			if readTask(t, pool, s, k).status != "sent" {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil after cancel", err)
	}
	mails := sink.Mails()
	if len(mails) != n {
		t.Fatalf("mails = %d; want %d", len(mails), n)
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[messageID(k)] = true
	}
	for _, ml := range mails {
		if !want[ml.MessageID] {
			t.Errorf("unexpected Message-ID %q", ml.MessageID)
		}
		delete(want, ml.MessageID)
		if ml.From != "orders@example.com" || len(ml.To) != 1 {
			t.Errorf("envelope %q -> %q", ml.From, ml.To)
		}
	}
	if got := testutil.ToFloat64(m.sent); got != n {
		t.Errorf("sent counter = %v; want %d", got, n)
	}
	if got := testutil.ToFloat64(m.failures); got < 3*n {
		t.Errorf("failures counter = %v; want at least %d", got, 3*n)
	}
}
