package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"

	"github.com/walrelay/walrelay/internal/kafkawire"
)

// leaders is what a retry asks of a producer that routes by a layout of its
// own (wireProducer): read the layout again, if it was not read since a
// moment, and who leads a partition now.
type leaders interface {
	Refresh(ctx context.Context, since time.Time) error
	Leader(ctx context.Context, topic string, partition int) (int32, error)
}

// wireProducer produces over kafkawire: each request goes to the
// partition's leader in the layout kafkawire read last, which a retry reads
// again when the leader may have moved (Sink.send).
type wireProducer struct {
	*kafkawire.Cluster
	// writeTimeout is Config.WriteTimeout: it bounds a request, and the
	// broker is asked to wait half of it for the in-sync replicas, so that
	// its answer comes before the request's own deadline.
	writeTimeout time.Duration
}

// errForeignTransport is newWireProducer's answer for a Config.Transport
// that is not a *kafka.Transport: its connections cannot be told, so the
// sink produces through it (kafka.Client.Produce) instead.
var errForeignTransport = errors.New("a transport other than *kafka.Transport")

// newWireProducer is the producer of a sink whose transport is a
// *kafka.Transport: its dialer, TLS, SASL and client id make kafkawire's
// connections too.
func newWireProducer(cfg Config) (*wireProducer, error) {
	t, ok := cfg.Transport.(*kafka.Transport)
	if !ok {
		return nil, errForeignTransport
	}
	c, err := kafkawire.New(kafkawire.Config{
		Brokers: cfg.Brokers, Dial: t.Dial, DialTimeout: t.DialTimeout, TLS: t.TLS, SASL: t.SASL, ClientID: t.ClientID,
	})
	if err != nil {
		return nil, err
	}
	return &wireProducer{Cluster: c, writeTimeout: cfg.WriteTimeout}, nil
}

// sentTo is a failed produce and the broker it went to (-1: it went to
// none, the partition had no leader to send to).
type sentTo struct {
	broker int32
	err    error
}

func (e *sentTo) Error() string { return e.err.Error() }
func (e *sentTo) Unwrap() error { return e.err }

// brokerOf is the broker a failed produce went to, or -1.
func brokerOf(err error) int32 {
	var s *sentTo
	if errors.As(err, &s) {
		return s.broker
	}
	return -1
}

// Produce sends req to its partition's leader and answers as
// kafka.Client.Produce does: a partition's error and record errors in the
// response, a transport's as the error (wrapped in *sentTo).
func (w *wireProducer) Produce(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, w.writeTimeout)
	defer cancel()
	id, err := w.Leader(ctx, req.Topic, req.Partition)
	if err != nil {
		return nil, &sentTo{broker: -1, err: err}
	}
	conn, err := w.Conn(ctx, id)
	if err != nil {
		return nil, &sentTo{broker: id, err: err}
	}
	msg, err := conn.Do(ctx, &produceAPI.Request{
		Acks:    int16(kafka.RequireAll),
		Timeout: int32((w.writeTimeout / 2).Milliseconds()),
		Topics: []produceAPI.RequestTopic{{
			Topic: req.Topic,
			Partitions: []produceAPI.RequestPartition{{
				Partition: int32(req.Partition),
				RecordSet: protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(req.Compression) & 0x7, Records: req.Records},
			}},
		}},
	})
	if err != nil {
		return nil, &sentTo{broker: id, err: err}
	}
	return produceResponse(msg.(*produceAPI.Response), req)
}

// produceResponse is the answer for req's one partition in res.
func produceResponse(res *produceAPI.Response, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			if t.Topic != req.Topic || int(p.Partition) != req.Partition {
				continue
			}
			out := &kafka.ProduceResponse{
				Throttle:       time.Duration(res.ThrottleTimeMs) * time.Millisecond,
				Error:          codeError(p.ErrorCode, p.ErrorMessage),
				BaseOffset:     p.BaseOffset,
				LogStartOffset: p.LogStartOffset,
			}
			if len(p.RecordErrors) > 0 {
				out.RecordErrors = make(map[int]error, len(p.RecordErrors))
				for _, e := range p.RecordErrors {
					out.RecordErrors[int(e.BatchIndex)] = errors.New(e.BatchIndexErrorMessage)
				}
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("produce to %s/%d: the broker's answer names no such partition", req.Topic, req.Partition)
}

// codeError is a Kafka error code with the broker's message, or nil.
func codeError(code int16, message string) error {
	switch {
	case code == 0:
		return nil
	case message == "":
		return kafka.Error(code)
	default:
		return fmt.Errorf("%w: %s", kafka.Error(code), message)
	}
}
