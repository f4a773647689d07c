package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/mail"
	"strings"
	"time"
)

// options are the notifier's flags.
type options struct {
	PostgresURL  string // the notifier's own database: inbox and e-mail tasks
	KafkaBrokers string // comma-separated
	Topic        string
	Group        string // Kafka consumer group
	ConsumerID   string // inbox consumer id: who has applied a message
	SMTPAddr     string
	From         string
	// The backoff between attempts at one e-mail while sending fails:
	// RetryMin doubled per attempt, capped at RetryMax, with jitter.
	RetryMin, RetryMax time.Duration
	PollInterval       time.Duration // how often an idle sender looks for due tasks
	Lease              time.Duration // how long a claimed task stays invisible to other senders
	SMTPTimeout        time.Duration // bounds one whole SMTP conversation
	SessionTimeout     time.Duration // the consumer group's session and rebalance timeouts
	MetricsAddr        string
	LogLevel           string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("notifier", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.PostgresURL, "postgres-url", "", "the notifier's own PostgreSQL database (required)")
	fs.StringVar(&o.KafkaBrokers, "kafka-brokers", "127.0.0.1:9092", "Kafka bootstrap brokers, comma-separated")
	fs.StringVar(&o.Topic, "topic", "outbox.order", "topic of the order messages")
	fs.StringVar(&o.Group, "group", "notifier", "Kafka consumer group")
	fs.StringVar(&o.ConsumerID, "consumer-id", "notifier", "inbox consumer id: instances with the same id apply each message once between them")
	fs.StringVar(&o.SMTPAddr, "smtp-addr", "127.0.0.1:2525", "SMTP server, host:port (plain SMTP, no TLS, no authentication)")
	fs.StringVar(&o.From, "from", "orders@example.com", "sender address of the e-mails")
	fs.DurationVar(&o.RetryMin, "retry-min", time.Second, "delay before the second attempt at an e-mail; doubles per attempt")
	fs.DurationVar(&o.RetryMax, "retry-max", time.Minute, "longest delay between attempts at an e-mail")
	fs.DurationVar(&o.PollInterval, "poll-interval", 200*time.Millisecond, "how often an idle sender looks for due e-mails")
	fs.DurationVar(&o.Lease, "lease", 30*time.Second, "how long a claimed e-mail stays with its sender before another may take it (must exceed --smtp-timeout)")
	fs.DurationVar(&o.SMTPTimeout, "smtp-timeout", 10*time.Second, "bound on one SMTP conversation")
	fs.DurationVar(&o.SessionTimeout, "session-timeout", 30*time.Second, "consumer group session and rebalance timeout (the broker allows 6s at least by default)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (empty: off)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, o.validate()
}

func (o options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.PostgresURL == "" {
		bad("--postgres-url is required")
	}
	if len(o.brokers()) == 0 {
		bad("--kafka-brokers is required")
	}
	for name, v := range map[string]string{"--topic": o.Topic, "--group": o.Group, "--consumer-id": o.ConsumerID} {
		if v == "" {
			bad("%s must not be empty", name)
		}
	}
	if _, _, err := net.SplitHostPort(o.SMTPAddr); err != nil {
		bad("--smtp-addr %q: want host:port", o.SMTPAddr)
	}
	if _, err := mail.ParseAddress(o.From); err != nil {
		bad("--from %q: %v", o.From, err)
	}
	if o.RetryMin <= 0 || o.RetryMax < o.RetryMin {
		bad("--retry-min (%s) must be positive and at most --retry-max (%s)", o.RetryMin, o.RetryMax)
	}
	if o.PollInterval <= 0 || o.SMTPTimeout <= 0 {
		bad("--poll-interval and --smtp-timeout must be positive")
	}
	if o.Lease <= o.SMTPTimeout {
		bad("--lease (%s) must exceed --smtp-timeout (%s): a task must not come back while its e-mail is still being sent", o.Lease, o.SMTPTimeout)
	}
	if o.SessionTimeout < time.Second {
		bad("--session-timeout (%s) must be at least 1s", o.SessionTimeout)
	}
	return errors.Join(errs...)
}

func (o options) brokers() []string {
	var out []string
	for _, b := range strings.Split(o.KafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
