// Package failpoint kills the process at named points, so that the fault
// suite (test/faults) can crash walrelay at the worst moments: after Kafka
// acknowledged a batch but before the position was confirmed, right after a
// status update, in the middle of a transaction, while answering a keepalive
// with messages in flight, and while reconnecting.
//
// Failpoints exist only in a binary built with -tags failpoints. In every
// other build Inject is an empty function that the compiler removes, so a
// production binary cannot be crashed through them, whatever its
// environment says.
//
// In a failpoints build, WALRELAY_FAILPOINT=name kills the process with
// SIGKILL the first time Inject(name) runs; name@N kills it at the N-th
// time. The points:
//
//	after-ack        the sink reported a batch's acknowledgements, before any status update
//	after-status     a standby status update was sent
//	publish          a message was handed to the sink (publish@500: the 500th)
//	keepalive-reply  a reply to a keepalive that asked for one was sent
//	reconnect        a session failed (the replication stream, or the leader
//	                 lock's) and a new one is about to start
//	inbox-after-commit  package inbox: a record was handled (its transaction committed, or it was a duplicate), its Kafka offset not yet committed
//	notifier-after-send examples/notifier: the SMTP server accepted an e-mail, its task not yet marked sent
//
// Internal: walrelay's own, and its fault suite's; the example services use
// it too.
package failpoint
