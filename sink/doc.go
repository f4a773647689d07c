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
// the aggregate id, its value the payload bytes unchanged (null for a
// tombstone, schema.Message.Tombstone), its headers follow the CloudEvents
// Kafka binary binding (ce_*, content-type), plus aggregate_type,
// aggregate_version and the row's own headers. Of those, the entries
// schema.CheckHeader refuses are left out (they would override the sink's,
// or not read as CloudEvents attributes), counted by reason and logged at
// most once a minute per header key; the message is published without them.
//
// Ordering is kept by discipline, and repeats by Kafka's idempotent
// producer (DECISIONS 49: every batch is stamped with a producer id and a
// sequence, so a broker drops a batch sent again after its answer was
// lost): each topic-partition has its own queue and goroutine, which sends one
// batch (one produce request for that topic-partition, to its leader, over
// internal/kafkawire's connections) and waits for its acknowledgement
// before it sends the next. Partitions are pipelined; within one, a later
// message never reaches Kafka before an earlier one is acknowledged. A
// transient failure retries the same batch, forever: a retry never
// reorders or skips records, and duplicates them only when the broker
// lost the producer's state or idempotence is off. After an error that says the
// partition's leader may have moved (not the leader, no leader, its
// connection failed or timed out) the cluster's layout is read again and a
// new leader is retried at once, while Kafka elects one the layout is read
// again within a second; any other transient error (not enough replicas,
// no broker answering at all) waits an exponential backoff with full
// jitter (DECISIONS 48). Errors Kafka did not classify (anything
// without a Kafka error code that is not a recognised network error) are
// retried like transient ones: only Kafka's own verdict condemns a message.
//
// A message that cannot be published for good is handled by policy. Kafka
// may refuse its record (too large for the topic, invalid, corrupt,
// unauthorised), its topic may be invalid, refused or missing (with topic
// creation off, or the broker's), its payload may be over
// Config.MaxPayloadBytes, or it may have no aggregate id. Without
// Config.Park (the "halt" policy) that fails the sink: nothing of the batch
// is acked and Run returns an *Error naming the topic, partition and
// message; the caller replays from its last confirmed position. With Park
// (the "park" policy) the message is handed to Park, which stores it in the
// dead-letter table, and is acked only once Park said it is stored; its
// aggregate is then blocked: every later message of the aggregate (by WAL
// Position) is parked behind it, so the aggregate's order survives, while
// other aggregates go on. A row that could not even become a message (the
// decoder's verdict) enters through PublishBad and takes the same path: it is
// parked, in the caller's order, and blocks its aggregate, or it fails the
// sink. Aggregates parked by earlier processes are blocked from the start
// (Config.Blocked). When Kafka
// refuses a batch of several records, the partition sends them again one at
// a time, in order, each acknowledged before the next, to find the culprit:
// Kafka writes nothing of a refused batch, so the others still reach it
// once and in order. All of this happens in the partition's goroutine in
// publish order, so a block set by a failure is seen by every later message
// of the aggregate, even one already queued. (An aggregate whose messages
// override their topic can span partitions; a block then reaches the other
// partitions only for messages they have not started to send.)
//
// A batch is sent when it holds Config.BatchMaxMessages or BatchMaxBytes, or
// when its oldest message has waited Config.Linger, or longer when that
// message was already late (a tenth of its lateness, at most ten times
// Config.Linger: a backlog drains in fuller requests). Publish blocks while
// MaxInFlightMessages or MaxInFlightBytes are in flight (published, not yet
// acknowledged), so memory stays bounded during an outage; a single message
// larger than the byte bound goes through when nothing else is in flight.
//
// Ownership: New starts nothing. Run owns every goroutine (one per active
// topic-partition, started when its first message arrives) and returns when
// they have all ended. Publish is normally called from one goroutine, in
// commit order. Close stops Publish; Run then sends what is queued without
// lingering and returns nil once all of it is acknowledged.
//
// It is public for programs that publish outbox messages to Kafka with
// walrelay's routing (the Java client's murmur2 partitioner) and
// acknowledgement discipline; walrelay's own callers are internal/relay and
// internal/backfill.
package sink
