// Package idempotency runs a business command at most once per
// idempotency key.
//
// # The lost response
//
// A client submits an order over HTTP; the service creates the order,
// writes its outbox row, commits, and the response is lost on the way back
// (a timeout, a dropped connection, a restarted proxy). The client cannot
// tell this from a request that never arrived, so it retries. Without a
// guard the retry creates a second order, and walrelay faithfully publishes
// a second order.submitted message: the warehouse reserves stock twice.
// walrelay's at-least-once delivery is taken care of by consumers (package
// inbox); a duplicate made by the producer is a new message with a new id,
// and no consumer can tell it is one.
//
// # Key, fingerprint, response
//
// The client sends an idempotency key with the request (a UUID it chose,
// in an Idempotency-Key header, say) and sends the same key on every retry
// of that request. The service passes Do the key, a fingerprint of the
// request (a hash of its body, say sha256), and the command. The first call
// inserts the key, runs the command in the same transaction and stores the
// command's response with the key, then commits: the order, its outbox row,
// the key and the response commit together or not at all. So a retry finds
// the key and returns the stored response without running anything: no
// second order and no second message, and the client gets the answer it
// missed. A retry that arrives while the first call is still running waits
// for it (the key's row is locked until the first call commits or rolls
// back). A command that fails rolls back everything, the key included, so
// the retry runs it again. The same key with a different fingerprint is a
// client bug (a key reused for another request): ErrKeyReused, which an
// HTTP service answers with 422.
//
// Do runs everything in the transaction it opens: the command must write
// through the pgx.Tx it is given (the outbox.Writer takes it as it is),
// never through another connection, or its effects escape the guarantee.
//
// # How long to keep keys
//
// A key protects only while its row exists. Prune deletes old keys in
// small batches; keep them longer than any client retries (a day is
// usual; a client that retries after a week gets a second order). A stored
// response is replayed as it was, so responses should not depend on the
// time they are read.
//
// For applications: it guards the commands (HTTP requests, jobs) whose
// effects write outbox rows.
package idempotency
