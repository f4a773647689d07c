package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/inbox"
)

// orders turns order messages into e-mail tasks. It never talks to SMTP:
// an order's message is consumed, and its e-mail owed, whether the mail
// server is up or not.
type orders struct {
	tasks   *taskStore
	log     *zap.Logger
	metrics *metrics
}

// handle is the inbox handler: it runs in the transaction that records the
// message in the inbox, so the task and the record commit together.
func (o *orders) handle(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	if m.Type != orderevents.TypeSubmitted {
		o.log.Debug("message type not for the notifier", zap.String("message_id", m.ID.String()), zap.String("type", m.Type))
		return nil
	}
	var s orderevents.Submitted
	if err := json.Unmarshal(m.Payload, &s); err != nil {
		o.refuse(m, fmt.Errorf("read the payload: %w", err))
		return nil
	}
	t, err := confirmation(s)
	if err != nil {
		o.refuse(m, err)
		return nil
	}
	created, err := o.tasks.insert(ctx, tx, t)
	if err != nil {
		return err
	}
	if created {
		o.metrics.created.Inc()
	}
	o.log.Debug("confirmation e-mail owed", zap.String("message_id", m.ID.String()),
		zap.String("task_key", t.Key), zap.Bool("created", created))
	return nil
}

// refuse logs an order that can never get an e-mail. Its message is still
// recorded as applied: retrying it would block the partition for good, and
// the order itself is fine. The counter is what an operator watches.
func (o *orders) refuse(m inbox.Message, why error) {
	o.metrics.refused.Inc()
	o.log.Error("order without a confirmation e-mail", zap.String("message_id", m.ID.String()),
		zap.String("aggregate_id", m.AggregateID), zap.String("topic", m.Topic), zap.Int("partition", m.Partition),
		zap.Int64("offset", m.Offset), zap.Error(why))
}

// newReader is the consumer group's reader, configured as inbox.Consume
// expects: offsets committed only by the inbox, synchronously, after the
// database commit; a new group starting at the beginning of the topic; a
// topic walrelay creates after the notifier started picked up.
func newReader(o options, log *zap.Logger) *kafka.Reader {
	c := inbox.ReaderConfig(o.brokers(), o.Group, o.Topic)
	c.SessionTimeout = o.SessionTimeout
	c.RebalanceTimeout = o.SessionTimeout
	c.HeartbeatInterval = o.SessionTimeout / 10
	c.ErrorLogger = kafka.LoggerFunc(func(format string, args ...any) {
		log.Warn("kafka reader", zap.String("error", fmt.Sprintf(format, args...)))
	})
	return kafka.NewReader(c)
}

// consume waits for the topic (walrelay creates it with the first order),
// then runs the inbox over it until ctx ends (nil then) or a record cannot
// be handled at all. The sender runs meanwhile: e-mails of earlier orders
// go out while the consumer waits.
func consume(ctx context.Context, o options, log *zap.Logger, in *inbox.Inbox, db inbox.Beginner, ord *orders) error {
	err := inbox.WaitForTopic(ctx, o.brokers(), o.Topic, time.Second, func() {
		log.Info("waiting for the topic to exist", zap.String("topic", o.Topic))
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	r := newReader(o, log)
	defer r.Close()
	err = in.Consume(ctx, r, db, ord.handle)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consume %s: %w", o.Topic, err)
	}
	return nil
}
