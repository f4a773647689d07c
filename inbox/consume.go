package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/failpoint"
)

// Consume reads r (a kafka.Reader with a GroupID) until ctx ends: for each
// record it parses, handles (retrying a failed handler with backoff, the
// partition waiting), and only after the database commit commits the Kafka
// offset. A crash between the two redelivers the record; Handle recognises
// it. A record that is not a walrelay message stops Consume with an error
// naming its topic, partition and offset: it is never skipped silently.
//
// Consume returns nil when ctx ends, and leaves closing r to the caller.
// Records are handled one at a time, in the order r returns them; a
// handler that keeps failing holds up the whole reader (it is retried until
// ctx ends, each failure logged at Warn), so that no later record of its
// partition overtakes it. A duplicate's offset is committed like any other.
// With r's CommitInterval zero (the default) every offset commit is
// synchronous; a failed one is retried while it may succeed.
func (in *Inbox) Consume(ctx context.Context, r *kafka.Reader, db Beginner, h Handler) error {
	if r.Config().GroupID == "" {
		return errors.New("inbox: consume: the reader has no GroupID, so it cannot commit offsets")
	}
	for {
		km, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("inbox: fetch: %w", err)
		}
		m, err := Parse(km)
		if err != nil {
			return fmt.Errorf("inbox: %w", err)
		}
		if err := in.handleRetrying(ctx, db, m, h); err != nil {
			return nil // ctx ended
		}
		// The transaction committed (or found the message applied before);
		// the offset is not committed yet. A crash here redelivers m.
		failpoint.Inject("inbox-after-commit")
		if err := in.commitOffset(ctx, r, km); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// handleRetrying handles m until it is applied or found a duplicate, and
// returns nil then, or ctx's error when ctx ends first.
func (in *Inbox) handleRetrying(ctx context.Context, db Beginner, m Message, h Handler) error {
	policy := in.retryPolicy()
	for attempt := 1; ; attempt++ {
		_, err := in.Handle(ctx, db, m, h)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := policy.Delay(attempt - 1)
		in.log.Warn("message handling failed; retrying", zap.Stringer("message_id", m.ID),
			zap.String("topic", m.Topic), zap.Int("partition", m.Partition), zap.Int64("offset", m.Offset),
			zap.Int("attempt", attempt), zap.Duration("backoff", d), zap.Error(err))
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// commitOffset commits km's offset, retrying while the error may pass (a
// coordinator moving, a rebalance, the network). It returns ctx's error
// when ctx ends, or the error that will not pass (a closed reader, a
// refusal such as missing authorisation).
func (in *Inbox) commitOffset(ctx context.Context, r *kafka.Reader, km kafka.Message) error {
	policy := in.retryPolicy()
	for attempt := 0; ; attempt++ {
		err := r.CommitMessages(ctx, km)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transientCommitError(err) {
			return fmt.Errorf("inbox: commit offset %d of %s[%d]: %w", km.Offset, km.Topic, km.Partition, err)
		}
		d := policy.Delay(attempt)
		in.log.Warn("offset commit failed; retrying", zap.String("topic", km.Topic),
			zap.Int("partition", km.Partition), zap.Int64("offset", km.Offset),
			zap.Duration("backoff", d), zap.Error(err))
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// transientCommitError reports whether an offset commit that failed with
// err may succeed when tried again.
func transientCommitError(err error) bool {
	if errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.EOF) {
		return false // the reader was closed
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		switch ke {
		case kafka.RebalanceInProgress, kafka.IllegalGeneration, kafka.UnknownMemberId:
			return true // the group is moving; the reader rejoins
		}
		return ke.Temporary()
	}
	return true // the network, a timeout
}

// retryPolicy is the backoff between attempts at a message or an offset
// commit.
func (in *Inbox) retryPolicy() backoff.Policy {
	return backoff.Policy{Min: in.c.RetryBackoffMin, Max: in.c.RetryBackoffMax}
}
