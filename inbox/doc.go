// Package inbox lets a consumer of walrelay's topics apply each message
// exactly once, in its own PostgreSQL database, although every message may
// arrive more than once.
//
// Delivery is at least once, from two sides. walrelay replays from its
// replication slot after a crash or a Kafka failure, so a message it had
// published may be published again, under the same message id (ce_id). And
// Kafka redelivers a record whose offset the consumer group had not
// committed when the consumer crashed or its partition moved to another
// instance. Neither can be ruled out; both can be recognised.
//
// Handle records (consumer_id, message_id) in an inbox table and applies
// the message's effect (the Handler) in the same transaction. The insert
// has a uniqueness guard (INSERT ... ON CONFLICT DO NOTHING): when the row
// is already there, the message was applied before and its effect is
// skipped. When the handler fails, the inbox row rolls back with the
// effect, and a later attempt applies the message. Consume drives this
// from a kafka.Reader and commits the Kafka offset only after the database
// transaction: a crash between the two commits redelivers a record that
// Handle then recognises as a duplicate. Database first, offset second;
// never the other way round, or a crash would lose the message.
//
// The consumer id keys the inbox, so consumers sharing a database (billing,
// warehouse) each apply a message once, independently of the others; all
// instances of one consumer share one id, so a message delivered to two of
// them at once is applied by one (the other's insert waits for the first
// transaction and then finds the row).
//
// The inbox makes a message's effect happen once; it does not order
// messages. Within a partition Kafka keeps walrelay's per-aggregate commit
// order, but a consumer that reads from several sources, or that was reset
// to an earlier offset, may see an aggregate's versions out of turn.
// CheckVersion compares a message's aggregate_version with the last one the
// consumer applied for that aggregate (First, Next, Stale or Gap) and
// records it, never moving backwards; the handler decides what a stale or a
// skipped-ahead message means for it.
//
// Retention: the inbox only recognises a duplicate whose row it still
// holds. Prune deletes a consumer's rows older than a given age, in small
// batches; that age must exceed the longest time a message can come again.
// That is at least the topics' Kafka retention (retention.ms) whenever a
// consumer group may be reset to the earliest offset, which rereads all of
// it, plus the time walrelay may take to replay after an outage, and the
// time before an operator retries a parked dead letter (same message id).
// Pruning sooner turns those redeliveries into second effects.
//
// For applications: it is the consuming half of the pattern, for the
// services that read walrelay's topics.
package inbox
