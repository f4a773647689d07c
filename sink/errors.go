package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/walrelay/walrelay/internal/kafkawire"
	"github.com/walrelay/walrelay/schema"
)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("sink is closed")

// Error is a permanent failure: Kafka refused a batch (or the sink refused a
// message) in a way that retrying cannot fix, and there is no Config.Park to
// take it. None of the batch was acked. Run returns it and Publish returns
// it from then on; the caller stops and replays from its last confirmed
// position.
type Error struct {
	Topic string
	// Partition is -1 when the message failed before it was routed.
	Partition int
	// MessageID and Token are those of the first message of the failed batch
	// or, when Kafka named a record of the batch, of that record.
	MessageID schema.MessageID
	Token     uint64
	// Aggregate and Position are the message's, when it is known.
	Aggregate schema.Aggregate
	Position  schema.Position
	Err       error
}

// Refused reports whether err is, or wraps, the sink's *Error: a message
// it cannot publish, under the halt policy. A new sink meets the message
// again, until an operator fixes its cause.
func Refused(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// messageError is the Error of message m (token) bound for topic/partition.
func messageError(topic string, partition int, m *schema.Message, token uint64, err error) *Error {
	e := &Error{Topic: topic, Partition: partition, Token: token, Err: err}
	if m != nil {
		e.MessageID, e.Aggregate, e.Position = m.ID, aggregateOf(m), m.Position()
	}
	return e
}

func (e *Error) Error() string {
	var at string
	switch {
	case e.Aggregate.ID != "" && e.Position != (schema.Position{}):
		at = fmt.Sprintf(" (aggregate %s/%s, position %s)", e.Aggregate.Type, e.Aggregate.ID, e.Position)
	case e.Aggregate.ID != "":
		at = fmt.Sprintf(" (aggregate %s/%s)", e.Aggregate.Type, e.Aggregate.ID)
	}
	return fmt.Sprintf("publish message %s%s to topic %q partition %d: %v", e.MessageID, at, e.Topic, e.Partition, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// errClass is how the sink reacts to an error.
type errClass int

const (
	// classTransient: retry the same batch after a backoff.
	classTransient errClass = iota
	// classPermanent: Kafka refused the records for good; park them, or
	// fail the sink.
	classPermanent
	// classUnknown: not recognised; retried like a transient error, because
	// only Kafka's own verdict (an error code) condemns a message, and a
	// retry can duplicate but never lose or reorder.
	classUnknown
)

func (c errClass) String() string {
	switch c {
	case classTransient:
		return "transient"
	case classPermanent:
		return "permanent"
	default:
		return "unknown"
	}
}

// classify sorts a produce or metadata error by behaviour. The caller checks
// its own context first: a deadline here is the per-request WriteTimeout.
func classify(err error) errClass {
	var kerr kafka.Error
	var restamp *restampError
	var pid *producerIDError
	switch {
	case errors.As(err, &restamp), errors.As(err, &pid):
		// The idempotent producer's own business (a fenced stamp, a
		// producer id not granted yet), never the records'.
		return classTransient
	case isAuthError(err):
		// The connection's authentication, not the records: parking them
		// would move good messages into the dead-letter table while the
		// credentials are wrong. Retried (and logged on every attempt) like
		// an unreachable broker; at start, Ping fails fast on it instead.
		return classTransient
	case errors.As(err, &kerr):
		if permanentCode(kerr) {
			return classPermanent
		}
		if kerr.Temporary() || retriableCode(kerr) {
			return classTransient
		}
		return classPermanent
	case errors.Is(err, protocol.ErrNoTopic), errors.Is(err, protocol.ErrNoPartition), errors.Is(err, protocol.ErrNoLeader),
		errors.Is(err, kafkawire.ErrNoLeader):
		// The transport's cached cluster layout lags behind a new topic or a
		// leader election; it refreshes itself.
		return classTransient
	case isNetworkError(err):
		return classTransient
	default:
		return classUnknown
	}
}

// retriableCode lists codes the Java client retries (they are
// RetriableException or InvalidMetadataException there) but kafka-go's
// Error.Temporary does not.
func retriableCode(e kafka.Error) bool {
	switch e {
	case kafka.BrokerNotAvailable, kafka.ReplicaNotAvailable, kafka.KafkaStorageError:
		return true
	}
	return false
}

// permanentCode lists codes kafka-go's Error.Temporary calls temporary but
// that condemn the records. CORRUPT_MESSAGE is a batch the broker's
// validation rejected (bad CRC, invalid size, a null key on a compacted
// topic): the Java client retries it, but a retry sends the same encoded
// bytes, and TCP and TLS checksums make corruption on the way implausible,
// so the same verdict would come back forever and stall the partition.
func permanentCode(e kafka.Error) bool {
	return e == kafka.InvalidMessage
}

// isAuthError reports a SASL exchange the broker refused: wrong
// credentials, or a mechanism the listener does not enable.
func isAuthError(err error) bool {
	var kerr kafka.Error
	if !errors.As(err, &kerr) {
		return false
	}
	switch kerr {
	case kafka.SASLAuthenticationFailed, kafka.UnsupportedSASLMechanism, kafka.IllegalSASLState:
		return true
	}
	return false
}

// isTLSError reports a TLS handshake that failed: on walrelay's side (the
// broker's certificate is not trusted, not for this name, or not valid) or
// on the broker's, which sends an alert (no client certificate, or one it
// does not trust). crypto/tls reports a received alert as a *net.OpError
// whose Op is "remote error", with an unexported alert type inside.
func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		op       *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &header) || errors.As(err, &op) && op.Op == "remote error"
}

func isNetworkError(err error) bool {
	var nerr net.Error
	var cerr *kafkawire.ConnError
	return errors.As(err, &nerr) || errors.As(err, &cerr) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
