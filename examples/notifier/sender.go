package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/mail"
	"net/smtp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/failpoint"
)

// markTimeout bounds recording a sent e-mail, which runs even when the
// notifier is stopping: the e-mail is out, its record must follow.
const markTimeout = 10 * time.Second

// sender sends the due e-mail tasks, one at a time, until its context ends.
// Several senders (goroutines or processes) may share one tasks table: a
// claim is exclusive for its lease.
type sender struct {
	db      *pgxpool.Pool
	tasks   *taskStore
	mailer  *mailer
	log     *zap.Logger
	metrics *metrics
	// Backoff between attempts at one task; poll: how long to wait when no
	// task is due; lease: see taskStore.claim.
	retryMin, retryMax, poll, lease time.Duration
}

// Run sends until ctx ends; it returns nil then. A database error is
// logged and retried after the poll interval: the tasks wait in the table.
func (s *sender) Run(ctx context.Context) error {
	for {
		busy, err := s.next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Warn("e-mail task store", zap.Error(err))
		}
		if busy && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.poll):
		}
	}
}

// next claims one due task and tries to send it; busy is false when no task
// was due.
func (s *sender) next(ctx context.Context) (busy bool, err error) {
	t, ok, err := s.tasks.claim(ctx, s.db, s.lease)
	if err != nil || !ok {
		return false, err
	}
	if err := s.mailer.send(ctx, t); err != nil {
		if ctx.Err() != nil {
			return true, nil // stopping: the lease brings the task back
		}
		return true, s.retryLater(ctx, t, err)
	}
	// A kill here (the failpoints build) leaves an e-mail that the SMTP
	// server accepted and a task still pending: after its lease the task is
	// sent again, with the same Message-ID.
	failpoint.Inject("notifier-after-send")
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := s.tasks.sent(mctx, s.db, t.Key); err != nil {
		return true, err
	}
	s.metrics.sent.Inc()
	s.log.Info("confirmation e-mail sent", zap.String("task_key", t.Key), zap.String("order_id", t.OrderID),
		zap.String("message_id", messageID(t.Key)), zap.Int("attempt", t.Attempts))
	return true, nil
}

// retryLater records a failed attempt and makes the task due again after
// the backoff for its attempt count.
func (s *sender) retryLater(ctx context.Context, t task, sendErr error) error {
	delay := backoff(t.Attempts, s.retryMin, s.retryMax, rand.Float64())
	s.metrics.failures.Inc()
	s.log.Warn("confirmation e-mail not sent, will retry", zap.String("task_key", t.Key),
		zap.String("order_id", t.OrderID), zap.Int("attempt", t.Attempts), zap.Duration("retry_in", delay), zap.Error(sendErr))
	return s.tasks.failed(ctx, s.db, t.Key, t.Attempts, delay, sendErr.Error())
}

// backoff is the delay after the attempt-th failed attempt (1 for the
// first): lo doubled per attempt and capped at hi, then drawn from its
// upper half by jitter (in [0, 1)), so that the tasks that failed together
// do not all come back at once.
func backoff(attempt int, lo, hi time.Duration, jitter float64) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + time.Duration(jitter*float64(d/2))
}

// mailer sends one e-mail per SMTP conversation.
type mailer struct {
	addr    string // host:port
	from    *mail.Address
	timeout time.Duration // bounds the whole conversation
}

// send delivers t's e-mail. It returns nil once the server accepted the
// data (250 after the final "."): what happens at QUIT cannot undo that.
func (m *mailer) send(ctx context.Context, t task) error {
	d := net.Dialer{Timeout: m.timeout}
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", m.addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(m.timeout)) //nolint:errcheck // a failed deadline shows as a failed write
	// Stopping cuts the conversation short instead of waiting out the timeout.
	defer context.AfterFunc(ctx, func() {
		conn.SetDeadline(time.Unix(1, 0)) //nolint:errcheck // the conversation fails either way
	})()
	host, _, _ := net.SplitHostPort(m.addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("smtp greeting from %s: %w", m.addr, err)
	}
	if err := m.transaction(c, t); err != nil {
		return fmt.Errorf("smtp to %s: %w", m.addr, err)
	}
	c.Quit() //nolint:errcheck // the e-mail was accepted already
	return nil
}

func (m *mailer) transaction(c *smtp.Client, t task) error {
	if err := c.Mail(m.from.Address); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	if err := c.Rcpt(t.Recipient); err != nil {
		return fmt.Errorf("RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(compose(t, m.from)); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	return nil
}
