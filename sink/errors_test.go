package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/walrelay/walrelay/internal/backoff"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errClass
	}{
		{"not enough replicas", kafka.NotEnoughReplicas, classTransient},
		{"not leader, wrapped with message", fmt.Errorf("%w: moved", kafka.NotLeaderForPartition), classTransient},
		{"request timed out", kafka.RequestTimedOut, classTransient},
		{"leader not available", kafka.LeaderNotAvailable, classTransient},
		{"broker not available", kafka.BrokerNotAvailable, classTransient},
		{"unknown topic or partition (produce)", kafka.UnknownTopicOrPartition, classTransient},
		{"message too large", kafka.MessageSizeTooLarge, classPermanent},
		{"record list too large", kafka.RecordListTooLarge, classPermanent},
		{"invalid record", kafka.InvalidRecord, classPermanent},
		{"corrupt message", kafka.InvalidMessage, classPermanent},
		{"corrupt message, wrapped", fmt.Errorf("record 0: %w", kafka.InvalidMessage), classPermanent},
		{"cluster authorization", kafka.ClusterAuthorizationFailed, classPermanent},
		{"not enough replicas after append", kafka.NotEnoughReplicasAfterAppend, classTransient},
		{"network exception", kafka.NetworkException, classTransient},
		{"request timed out, wrapped", fmt.Errorf("produce: %w", kafka.RequestTimedOut), classTransient},
		{"storage error", kafka.KafkaStorageError, classTransient},
		{"connection reset by peer", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, classTransient},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), classTransient},
		{"closed connection", net.ErrClosed, classTransient},
		{"EOF", io.EOF, classTransient},
		{"topic authorization", fmt.Errorf("produce: %w", kafka.TopicAuthorizationFailed), classPermanent},
		{"invalid topic", kafka.InvalidTopic, classPermanent},
		{"unsupported version", kafka.UnsupportedVersion, classPermanent},
		{"unknown server error", kafka.Unknown, classPermanent},
		{"transport has no topic yet", protocol.NewErrNoTopic("t"), classTransient},
		{"transport has no leader", fmt.Errorf("x: %w", protocol.NewErrNoLeader("t", 1)), classTransient},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, classTransient},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), classTransient},
		{"unexpected EOF", io.ErrUnexpectedEOF, classTransient},
		{"per-request deadline", context.DeadlineExceeded, classTransient},
		{"something else", errors.New("surprise"), classUnknown},
		// Authentication is the connection's, not the records': retried,
		// never parked.
		{"SASL authentication failed, as kafka-go wraps it", fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512", kafka.SASLAuthenticationFailed), classTransient},
		{"unsupported SASL mechanism", kafka.UnsupportedSASLMechanism, classTransient},
		{"untrusted certificate", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, classUnknown},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: classify(%v) = %v; want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// The sink's retries follow backoff.Policy (its tests check the doubling,
// the cap and the full jitter) with the configured bounds.
func TestRetryPolicyFromConfig(t *testing.T) {
	cfg := testConfig()
	h := start(t, cfg, noProduce(t), fixedPartitions(1))
	if want := (backoff.Policy{Min: cfg.RetryBackoffMin, Max: cfg.RetryBackoffMax}); h.s.retry.Min != want.Min || h.s.retry.Max != want.Max {
		t.Errorf("retry policy = %+v; want %+v", h.s.retry, want)
	}
}

func TestRecordErrorNamesLowestIndex(t *testing.T) {
	res := &kafka.ProduceResponse{
		Error:        kafka.InvalidRecord,
		RecordErrors: map[int]error{4: errors.New("bad four"), 2: errors.New("bad two")},
	}
	e := newRecordError(res)
	if e.index != 2 || !errors.Is(e, kafka.InvalidRecord) {
		t.Errorf("newRecordError = index %d, %v; want index 2 wrapping InvalidRecord", e.index, e)
	}
}

// Ping's error says which step failed, and the check's fix names the
// settings of that step (walrelay says them as its flags).
func TestPingErrorNamesTheStep(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want, fix string
	}{
		{"SASL", fmt.Errorf("%w: invalid credentials", kafka.SASLAuthenticationFailed), "kafka brokers b:9093 refused the SASL authentication: ", SettingSASL},
		{"mechanism", kafka.UnsupportedSASLMechanism, "refused the SASL authentication", SettingSASL},
		{"unknown CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "TLS handshake with kafka brokers b:9093 failed: ", SettingTLSTrust},
		{"wrong name", fmt.Errorf("dial: %w", x509.HostnameError{Host: "kafka.invalid", Certificate: &x509.Certificate{}}), "TLS handshake", SettingTLSTrust},
		{"no client certificate", &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, "TLS handshake with kafka brokers b:9093 failed: remote error", SettingClientCert},
		{"closed", io.EOF, "kafka brokers b:9093 closed the connection (does their listener expect", SettingBrokers},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "kafka brokers b:9093 do not answer: ", SettingBrokers},
	}
	for _, tt := range tests {
		err := pingError("b:9093", tt.err)
		if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, tt.err) {
			t.Errorf("%s: pingError = %q; want it to contain %q and wrap %v", tt.name, err, tt.want, tt.err)
		}
		if fix := reachFix(err); !strings.Contains(fix, tt.fix) {
			t.Errorf("%s: fix = %q; want it to name %s", tt.name, fix, tt.fix)
		}
	}
}
