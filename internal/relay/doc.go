// Package relay is walrelay's pipeline: it connects the replication stream
// (slot), the pgoutput decoder, the Kafka sink and the confirm rule
// (checkpoint), so that data flows one way:
//
//	slot -> decoder -> sink -> acks -> checkpoint -> slot
//
// One goroutine (the pump) decodes events in WAL order, opens and closes
// transactions in the checkpoint tracker and hands messages to the sink,
// and rows the decoder rejected too: the sink parks them or halts by
// policy, so the relay never talks to the dead-letter store;
// the sink's workers report Kafka acknowledgements back through Ack; the
// stream asks the tracker for the safe position whenever it sends a status
// update. The tracker is the only shared state and sits behind one mutex.
//
// A message is counted in the tracker (Add) before it is handed to the
// sink, so an acknowledgement can never arrive for a message the tracker
// does not know, and the safe position can never pass it.
//
// Internal: walrelay's own, for `walrelay run`; applications have no use for
// it.
package relay
