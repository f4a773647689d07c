package dlq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
)

// Publisher publishes the messages of a Retry to Kafka. Publish sends msgs
// in the order given, never a message before the earlier ones of its
// aggregate are acknowledged, waits for Kafka's acknowledgements and reports,
// for each message, whether Kafka acknowledged it, with the first error. It
// may stop at the first error: what it did not send is not acknowledged.
type Publisher interface {
	Publish(ctx context.Context, msgs []*schema.Message) (acked []bool, err error)
}

// Item is one dead letter in a Retry's result.
type Item struct {
	Position  schema.Position
	MessageID *schema.MessageID
	Aggregate schema.Aggregate
	Type      string
	// Why says why a message was left parked; empty for one published.
	Why string
}

// Name is the message id, or the position of a row without one.
func (it Item) Name() string {
	if it.MessageID != nil {
		return it.MessageID.String()
	}
	return "the row at " + it.Position.String()
}

// Result is what a Retry did.
type Result struct {
	// Published were acknowledged by Kafka and deleted, in publish order.
	Published []Item
	// Left are still parked, each with the reason.
	Left []Item
	// PublishErr is the publisher's first error, if any.
	PublishErr error
}

// NotFirstError refuses to retry one message while an earlier message of
// its aggregate is parked: publishing it would break the aggregate's order.
type NotFirstError struct {
	Message Item
	First   Item
}

func (e *NotFirstError) Error() string {
	return fmt.Sprintf("message %s is not the first parked message of aggregate %s/%s: %s (position %s) comes before it; "+
		"retry the whole aggregate, or retry or discard %s first", e.Message.Name(), e.Message.Aggregate.Type,
		e.Message.Aggregate.ID, e.First.Name(), e.First.Position, e.First.Name())
}

// finishTimeout bounds the bookkeeping after publishing, which runs even
// when ctx was cancelled meanwhile: what Kafka acknowledged must be deleted.
const finishTimeout = 30 * time.Second

// Retry publishes the parked messages sel names again, with their message
// ids, headers and payloads, in (aggregate, position) order, and deletes
// those Kafka acknowledged. The ones that failed stay parked with retries
// incremented and last_error set. Rows that could not be decoded are left
// as they are, and so are the later rows of their aggregate.
//
// The selected rows are locked FOR UPDATE from the start to the commit, so
// that a concurrent Park of a later message of their aggregate waits and
// then sees what is still parked (see the package doc). One message is
// retried only if it is the first parked message of its aggregate;
// otherwise Retry returns a *NotFirstError and does nothing.
func (s *Store) Retry(ctx context.Context, sel Selection, pub Publisher) (Result, error) {
	c := &conds{}
	c.add("status = 'parked'")
	if err := sel.addTo(c); err != nil {
		return Result{}, err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("retry %s: begin: %w", sel, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	rows, err := s.lockForRetry(ctx, tx, c)
	if err != nil {
		return Result{}, fmt.Errorf("retry %s: %w", sel, err)
	}
	if sel.single() {
		if err := s.checkFirst(ctx, tx, rows); err != nil {
			return Result{}, err
		}
	}
	send, res := plan(rows)
	if len(send) == 0 {
		return res, nil
	}
	msgs := make([]*schema.Message, len(send))
	for i, r := range send {
		msgs[i] = r.msg
	}
	acked, perr := pub.Publish(ctx, msgs)
	return s.finish(ctx, tx, send, acked, perr, res)
}

// retryRow is a locked parked row: msg is nil when it cannot be retried,
// and Why then says why.
type retryRow struct {
	Item
	msg *schema.Message
}

// retryColumns are the columns Retry reads, in scanRetryRow's order.
const retryColumns = `commit_lsn::text, seq, message_id, coalesce(aggregate_type, ''), coalesce(aggregate_id, ''),
	aggregate_version, coalesce(type, ''), coalesce(topic, ''), payload, coalesce(content_type, ''), headers,
	occurred_at, committed_at, row_data IS NOT NULL, ` + undecodable

func (s *Store) lockForRetry(ctx context.Context, tx pgx.Tx, c *conds) ([]retryRow, error) {
	rows, err := tx.Query(ctx, `SELECT `+retryColumns+` FROM `+s.table+` WHERE `+strings.Join(c.sql, " AND ")+
		order+` FOR UPDATE`, c.args...)
	if err != nil {
		return nil, fmt.Errorf("lock parked rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRetryRow)
	if err != nil {
		return nil, fmt.Errorf("lock parked rows: %w", err)
	}
	return out, nil
}

func scanRetryRow(row pgx.CollectableRow) (retryRow, error) {
	var r retryRow
	var lsn string
	var seq int64
	var id nullID
	var version *int64
	var headers []byte
	var occurred, committed *time.Time
	var rowData, bad bool
	m := &schema.Message{}
	err := row.Scan(&lsn, &seq, &id, &r.Aggregate.Type, &r.Aggregate.ID, &version, &r.Type, &m.Topic,
		&m.Payload, &m.ContentType, &headers, &occurred, &committed, &rowData, &bad)
	if err != nil {
		return r, err
	}
	if r.Position, err = position(lsn, seq); err != nil {
		return r, err
	}
	r.MessageID = id.ptr()
	switch {
	case rowData:
		r.Why = "walrelay could not decode this row, so it cannot be retried: fix the data with a new outbox row, then discard this one"
		return r, nil
	case bad:
		r.Why = "this row lacks a message id or an aggregate id, so it cannot be retried: fix the data with a new outbox row, then discard this one"
		return r, nil
	}
	if m.Headers, err = parseHeaders(headers); err != nil {
		return r, fmt.Errorf("row %s: %w", r.Position, err)
	}
	if m.Payload == nil { // NULL: a tombstone, parked as one; an empty payload is not nil
		m.Tombstone, m.ContentType = true, ""
	}
	m.ID, m.AggregateType, m.AggregateID, m.Type = *r.MessageID, r.Aggregate.Type, r.Aggregate.ID, r.Type
	if version != nil {
		m.AggregateVersion, m.HasVersion = *version, true
	}
	m.OccurredAt, m.CommitTime = deref(occurred), deref(committed)
	m.CommitLSN, m.Seq = r.Position.CommitLSN, r.Position.Seq
	r.msg = m
	return r, nil
}

// checkFirst refuses a single-message retry when a parked message of the
// same aggregate comes before it.
func (s *Store) checkFirst(ctx context.Context, tx pgx.Tx, rows []retryRow) error {
	for _, r := range rows {
		if !r.Aggregate.Known() {
			continue
		}
		var lsn string
		var seq int64
		var id nullID
		err := tx.QueryRow(ctx, `SELECT commit_lsn::text, seq, message_id FROM `+s.table+`
			WHERE status = 'parked' AND aggregate_type = $1 AND aggregate_id = $2
			  AND (commit_lsn, seq) < ($3::pg_lsn, $4::integer)
			ORDER BY commit_lsn, seq LIMIT 1`,
			r.Aggregate.Type, r.Aggregate.ID, r.Position.CommitLSN.String(), int64(r.Position.Seq)).Scan(&lsn, &seq, &id)
		if err == pgx.ErrNoRows {
			continue
		}
		if err != nil {
			return fmt.Errorf("retry %s: look for parked messages ahead: %w", r.Name(), err)
		}
		first := Item{MessageID: id.ptr(), Aggregate: r.Aggregate}
		if first.Position, err = position(lsn, seq); err != nil {
			return fmt.Errorf("retry %s: %w", r.Name(), err)
		}
		return &NotFirstError{Message: r.Item, First: first}
	}
	return nil
}

// plan splits the locked rows, in order, into those to publish and those
// left: a row that cannot be retried, and every later row of its
// aggregate, which must not overtake it.
func plan(rows []retryRow) (send []retryRow, res Result) {
	stuck := make(map[schema.Aggregate]Item)
	for _, r := range rows {
		if first, ok := stuck[r.Aggregate]; ok {
			r.Why = "waits behind " + first.Name() + " of its aggregate, which cannot be retried"
		}
		if r.Why != "" {
			if r.Aggregate.Known() {
				if _, ok := stuck[r.Aggregate]; !ok {
					stuck[r.Aggregate] = r.Item
				}
			}
			res.Left = append(res.Left, r.Item)
			continue
		}
		send = append(send, r)
	}
	return send, res
}

// finish deletes the rows Kafka acknowledged, marks the others as tried
// and commits, with a context of its own: acknowledged rows must go even
// when ctx was cancelled while publishing.
func (s *Store) finish(ctx context.Context, tx pgx.Tx, send []retryRow, acked []bool, perr error, res Result) (Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	res.PublishErr = perr
	why := "Kafka did not acknowledge it"
	if perr != nil {
		why = "not published: " + perr.Error()
	}
	var done, failed []schema.Position
	for i, r := range send {
		if i < len(acked) && acked[i] {
			res.Published = append(res.Published, r.Item)
			done = append(done, r.Position)
			continue
		}
		r.Why = why
		res.Left = append(res.Left, r.Item)
		failed = append(failed, r.Position)
	}
	if err := s.settle(ctx, tx, done, failed, why); err != nil {
		return res, fmt.Errorf("%d messages were published, but their dead letters stay (a retry will publish them again): %w",
			len(done), err)
	}
	return res, nil
}

// settle deletes the done rows and marks the failed ones, then commits.
func (s *Store) settle(ctx context.Context, tx pgx.Tx, done, failed []schema.Position, lastError string) error {
	const match = ` WHERE (commit_lsn, seq) IN (SELECT l::pg_lsn, q FROM unnest($1::text[], $2::bigint[]) AS u(l, q))`
	if len(done) > 0 {
		lsns, seqs := positionArrays(done)
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.table+match, lsns, seqs); err != nil {
			return fmt.Errorf("delete published dead letters: %w", err)
		}
	}
	if len(failed) > 0 {
		lsns, seqs := positionArrays(failed)
		if _, err := tx.Exec(ctx, `UPDATE `+s.table+` SET retries = retries + 1, last_error = $3`+match,
			lsns, seqs, lastError); err != nil {
			return fmt.Errorf("record failed retries: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func positionArrays(ps []schema.Position) ([]string, []int64) {
	lsns, seqs := make([]string, len(ps)), make([]int64, len(ps))
	for i, p := range ps {
		lsns[i], seqs[i] = p.CommitLSN.String(), int64(p.Seq)
	}
	return lsns, seqs
}
