package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"
	"go.uber.org/zap"

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
	compression  compress.Compression
	log          *zap.Logger

	// initMu makes one InitProducerId request at a time; mu guards idem.
	initMu sync.Mutex
	mu     sync.Mutex
	idem   kafkawire.Idempotence
}

// errForeignTransport is newWireProducer's answer for a Config.Transport
// that is not a *kafka.Transport: its connections cannot be told, so the
// sink produces through it (kafka.Client.Produce) instead.
var errForeignTransport = errors.New("a transport other than *kafka.Transport")

// newWireProducer is the producer of a sink whose transport is a
// *kafka.Transport: its dialer, TLS, SASL and client id make kafkawire's
// connections too.
func newWireProducer(cfg Config, log *zap.Logger) (*wireProducer, error) {
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
	w := &wireProducer{Cluster: c, writeTimeout: cfg.WriteTimeout, compression: compress.Compression(cfg.Compression), log: log}
	if cfg.NoIdempotence {
		w.idem.Off()
	}
	return w, nil
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

// produceResponse is the answer for req's one partition in res.
func produceResponse(res *produceAPI.Response, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			if t.Topic != req.Topic || int(p.Partition) != req.Partition {
				continue
			}
			out := &kafka.ProduceResponse{
				Throttle:       time.Duration(res.ThrottleTimeMs) * time.Millisecond,
				Error:          kafkawire.CodeError(p.ErrorCode, p.ErrorMessage),
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

// attempt is what the tries of one batch share: the stamp it was sent with
// (kafkawire.NoStamp when the producer is not idempotent), kept across
// retries so that the broker can tell a retry from new records.
type attempt struct {
	stamp   kafkawire.Stamp
	stamped bool
}

// restampError is an answer that fenced the batch's stamp (KIP-360): the
// batch is sent again at once, stamped under the next grant. A retry, not
// a refusal: classify takes it as transient.
type restampError struct{ err error }

func (e *restampError) Error() string { return "stamped again after: " + e.err.Error() }
func (e *restampError) Unwrap() error { return e.err }

// ProduceRecords sends batch, stamped (att), to its partition's leader as
// one record batch encoded here, and answers as kafka.Client.Produce does.
// The answer is judged for the idempotent producer first: a duplicate of a
// batch Kafka has is success; an answer that fences the stamp is a
// *restampError.
func (w *wireProducer) ProduceRecords(ctx context.Context, topic string, partition int, batch []*record, att *attempt) (*kafka.ProduceResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, w.writeTimeout)
	defer cancel()
	id, err := w.Leader(ctx, topic, partition)
	if err != nil {
		return nil, &sentTo{broker: -1, err: err}
	}
	conn, err := w.Conn(ctx, id)
	if err != nil {
		return nil, &sentTo{broker: id, err: err}
	}
	tp := kafkawire.TopicPartition{Topic: topic, Partition: int32(partition)}
	if err := w.stamp(ctx, conn, tp, len(batch), att); err != nil {
		return nil, &sentTo{broker: id, err: err}
	}
	set, err := kafkawire.AppendRecordSet(nil, &kafkawire.Batch{ProducerID: att.stamp.ProducerID, ProducerEpoch: att.stamp.Epoch,
		BaseSequence: att.stamp.Sequence, Compression: w.compression, Records: wireRecords(batch)})
	if err != nil {
		return nil, err
	}
	msg, err := conn.Do(ctx, &rawproduce.Request{Acks: int16(kafka.RequireAll), Timeout: int32((w.writeTimeout / 2).Milliseconds()),
		Topics: []rawproduce.RequestTopic{{Topic: topic, Partitions: []rawproduce.RequestPartition{{
			Partition: int32(partition), RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(set)}}}}}})
	if err != nil {
		w.judge(tp, att, len(batch), err)
		return nil, &sentTo{broker: id, err: err}
	}
	res, err := produceResponse(msg.(*produceAPI.Response), &kafka.ProduceRequest{Topic: topic, Partition: partition})
	if err != nil {
		return nil, &sentTo{broker: id, err: err}
	}
	return w.answered(tp, att, len(batch), id, res)
}

// answered judges a produce answer for the idempotent producer.
func (w *wireProducer) answered(tp kafkawire.TopicPartition, att *attempt, n int, broker int32, res *kafka.ProduceResponse) (*kafka.ProduceResponse, error) {
	switch w.judge(tp, att, n, res.Error) {
	case kafkawire.Written:
		res.Error = nil // a duplicate of a batch Kafka has is a success
		return res, nil
	case kafkawire.Restamp:
		return nil, &sentTo{broker: broker, err: &restampError{err: res.Error}}
	}
	if len(res.RecordErrors) > 0 || res.Error != nil && classify(res.Error) == classPermanent {
		w.mu.Lock()
		w.idem.Refused(att.stamp)
		w.mu.Unlock()
	}
	return res, nil
}

// judge is the idempotent producer's verdict on err, the answer to the
// batch of n records stamped att; a batch to stamp again loses its stamp.
func (w *wireProducer) judge(tp kafkawire.TopicPartition, att *attempt, n int, err error) kafkawire.Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.idem.Answer(tp, att.stamp, n, err)
	if v == kafkawire.Restamp {
		att.stamped = false
	}
	return v
}

// stamp gives the batch its stamp, unless it has one still good: after a
// producer id was asked for (on conn) if the bookkeeping needs one.
func (w *wireProducer) stamp(ctx context.Context, conn *kafkawire.Conn, tp kafkawire.TopicPartition, n int, att *attempt) error {
	for {
		w.mu.Lock()
		_, need := w.idem.Need()
		if !need {
			if !att.stamped || !w.idem.Current(att.stamp) {
				att.stamp, att.stamped = w.idem.Stamp(tp, n), true
			}
			w.mu.Unlock()
			return nil
		}
		w.mu.Unlock()
		if err := w.initProducerID(ctx, conn); err != nil {
			return err
		}
	}
}

// Idempotent reports whether batches are stamped now.
func (w *wireProducer) Idempotent() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idem.On()
}

// initProducerID asks conn's broker for the producer id or the epoch bump
// the bookkeeping needs (one request at a time). A broker that refuses the
// idempotent producer (no IDEMPOTENT_WRITE or cluster right on old
// brokers, a version that lacks it) turns it off, with a warning: batches
// then go unstamped, one at a time per partition as before.
func (w *wireProducer) initProducerID(ctx context.Context, conn *kafkawire.Conn) error {
	w.initMu.Lock()
	defer w.initMu.Unlock()
	w.mu.Lock()
	r, need := w.idem.Need()
	w.mu.Unlock()
	if !need {
		return nil // another partition got it meanwhile
	}
	v, ok := conn.Version(protocol.InitProducerId)
	if ok && v < 3 {
		r = kafkawire.InitRequest{ProducerID: -1, Epoch: -1} // no epoch bump before v3 (Kafka 2.5): a new id
	}
	var res *initproducerid.Response
	if ok {
		msg, err := conn.Do(ctx, &initproducerid.Request{TransactionTimeoutMs: math.MaxInt32, ProducerID: r.ProducerID, ProducerEpoch: r.Epoch})
		if err != nil {
			return &producerIDError{err: err}
		}
		res = msg.(*initproducerid.Response)
	}
	switch err := initError(res); {
	case err == nil:
		w.mu.Lock()
		w.idem.Granted(res.ProducerID, res.ProducerEpoch)
		w.mu.Unlock()
		w.log.Info("idempotent producer: producer id granted", zap.Int64("producer_id", res.ProducerID), zap.Int16("epoch", res.ProducerEpoch),
			zap.Bool("epoch_bumped", r.ProducerID >= 0))
		return nil
	case refusesIdempotence(err):
		w.mu.Lock()
		w.idem.Off()
		w.mu.Unlock()
		w.log.Warn("the brokers refuse Kafka's idempotent producer: producing without it, one batch at a time per partition; a broker fault may leave duplicates (walrelay check says what to grant)",
			zap.String("broker", conn.Addr()), zap.Error(err))
		return nil
	default:
		return &producerIDError{err: err}
	}
}

// initError is the error of an InitProducerId answer; res nil is a broker
// that does not speak InitProducerId.
func initError(res *initproducerid.Response) error {
	if res == nil {
		return fmt.Errorf("the broker does not speak InitProducerId: %w", kafka.UnsupportedVersion)
	}
	return kafkawire.CodeError(res.ErrorCode, "")
}

// refusesIdempotence reports an InitProducerId answer that will not change
// by asking again: no right to it, or a broker too old for it.
func refusesIdempotence(err error) bool {
	return errors.Is(err, kafka.ClusterAuthorizationFailed) || errors.Is(err, kafka.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kafka.UnsupportedVersion)
}

// producerIDError is an InitProducerId request that failed (a broker
// loading its state, a connection lost): not the records' fault, so the
// batch is retried, never parked.
type producerIDError struct{ err error }

func (e *producerIDError) Error() string { return "ask for a producer id: " + e.err.Error() }
func (e *producerIDError) Unwrap() error { return e.err }

// wireRecords are batch's records as kafkawire encodes them.
func wireRecords(batch []*record) []kafkawire.Record {
	out := make([]kafkawire.Record, len(batch))
	for i, r := range batch {
		out[i] = kafkawire.Record{Time: r.time, Key: r.key, Value: r.value, Headers: r.headers}
	}
	return out
}
