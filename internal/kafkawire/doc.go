// Package kafkawire is walrelay's own connection to a Kafka cluster for
// producing: one pipelined connection per broker, and the cluster's layout
// (which broker leads which partition) read when the caller asks, not on a
// timer. It speaks the protocol through kafka-go's protocol package
// (request and response encoding, SASL mechanisms); only the connections
// and the layout are walrelay's.
//
// Why not kafka-go's Transport: it routes every request by a cluster layout
// it refreshes on a timer (6s by default), never because a broker said it no
// longer leads a partition, so a producer keeps sending to a dead leader for
// up to that long after Kafka elected a new one; and it sends one request at
// a time per connection, opening more connections under load, so requests
// to one broker can overtake each other. Here a Conn writes requests in the
// order Do is called and the broker answers them in that order (Kafka
// processes a connection's requests one after another and answers in the
// same order), and Cluster.Refresh reads the layout at once when a produce
// says the leader moved: a retry goes to the new leader as soon as Kafka
// names it.
//
// Ownership: Dial starts the connection's reader goroutine; Close ends it
// and returns after it has. A Cluster owns its connections and closes them
// in Close. Everything here is safe for concurrent use.
//
// Internal: the transport of walrelay's sink.
package kafkawire
