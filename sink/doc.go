// Package sink publishes outbox messages to Kafka and reports, message by
// message, when Kafka has acknowledged them with acks=all. The caller
// confirms WAL positions from those acknowledgements only, so the one rule
// the package never breaks is: no ack for a message Kafka did not
// acknowledge.
//
// A message is routed to a topic (its own Topic, else Config.TopicTemplate)
// and to a partition by its aggregate id, with the murmur2 hash of Kafka's
// Java client (toPositive(murmur2(key)) % partitions), so walrelay and Java
// producers agree on where an aggregate lives. The partition count of a topic
// is read once and then fixed for the life of the Sink. The record's key is
// the aggregate id, its value the payload bytes unchanged, its headers follow
// the CloudEvents Kafka binary binding (ce_*), plus aggregate_type,
// aggregate_version and the row's own headers (which cannot override the
// sink's).
//
// kafka-go has no idempotent producer, so ordering is kept by discipline:
// each topic-partition has its own queue and goroutine, which sends one
// batch (one kafka.Client.Produce request for that topic-partition) and waits
// for its acknowledgement before it sends the next. Partitions are
// pipelined; within one, a later message never reaches Kafka before an
// earlier one is acknowledged. A transient failure (network, leader change,
// timeout, not enough replicas) retries the same batch, forever, with
// exponential backoff and full jitter: a retry may duplicate records but
// never reorders or skips them. A permanent failure (Kafka refuses the records
// or the topic: too large, invalid, unauthorised, missing) acks nothing of
// the batch, fails the sink and is returned by Run as an *Error naming the
// topic, partition and message; the caller then replays from its last
// confirmed position or parks the message. Errors Kafka did not classify
// (anything without a Kafka error code that is not a recognised network
// error) are retried like transient ones: only Kafka's own verdict condemns
// a message.
//
// A batch is sent when it holds Config.BatchMaxMessages or BatchMaxBytes, or
// when its oldest message has waited Config.Linger. Publish blocks while
// MaxInFlightMessages or MaxInFlightBytes are in flight (published, not yet
// acknowledged), so memory stays bounded during an outage; a single message
// larger than the byte bound goes through when nothing else is in flight.
//
// Ownership: New starts nothing. Run owns every goroutine (one per active
// topic-partition, started when its first message arrives) and returns when
// they have all ended. Publish is normally called from one goroutine, in
// commit order. Close stops Publish; Run then sends what is queued without
// lingering and returns nil once all of it is acknowledged.
package sink
