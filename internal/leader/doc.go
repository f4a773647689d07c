// Package leader decides which of several walrelay processes pointed at one
// slot may publish. Leadership is a PostgreSQL session advisory lock, taken
// with pg_try_advisory_lock on a dedicated, normal (non-replication)
// connection: the lock lives exactly as long as that server session, so
// PostgreSQL itself, not walrelay, is the arbiter. The slot's own
// one-reader rule is a second fence behind it.
//
// The key is LockKey(current_database(), slot): a 64-bit FNV-1a hash, so
// two slots, or one slot name in two databases, never share a leader.
//
// An Elector campaigns in Run. A standby tries the lock every
// RetryInterval. Once it holds the lock, Run calls the caller's lead func
// and proves the lock every CheckInterval with a round trip on the lock
// connection that asks pg_locks whether this very backend still holds the
// key. A failed or slow check, a lost connection or an expired lease puts
// leadership in doubt: Run cancels lead's context, waits for lead to
// return, drops the connection (which certainly frees the lock), waits one
// RetryInterval to give the standbys their turn, and campaigns again.
//
// The lease is what makes a stopped or cut-off leader harmless. Every
// successful check renews it from the moment the check was sent; Check,
// which the Kafka sink calls before every batch, compares the monotonic
// clock with it and does no I/O. A process paused longer than LeaseTimeout
// (SIGSTOP, a frozen VM, a long GC) therefore fails Check on wake, before
// any of its goroutines can publish, even though nobody has told it yet
// that its lock is gone.
//
// Why the lease is shorter than the lock: on the lock session walrelay sets
// the server's tcp_user_timeout to twice LeaseTimeout (at least 10s) and
// its keepalives (idle LeaseTimeout, at least 5s; interval 2s; 3 probes).
// A server that stops hearing from a leader therefore keeps the lock for at
// least 2*LeaseTimeout after the last check the leader saw answered, while
// the leader stops publishing LeaseTimeout after that check was sent. With
// the defaults a standby takes over within about 10 to 13s of a network cut
// (server detection plus RetryInterval), and within RetryInterval of a
// kill -9 (the kernel closes the socket and the server frees the lock at
// once).
//
// What the lease cannot cover: an administrator's pg_terminate_backend frees
// the lock at once, while the old leader learns of it only at its next check
// (within CheckInterval). A standby that wins in that window can overlap the
// old leader for up to CheckInterval; the slot's one-reader rule keeps the
// new leader from streaming until the old one has let go, and a duplicate
// is the worst outcome. Poolers in transaction mode break session locks;
// the check notices (the lock is not on its backend) and steps down.
//
// Internal: walrelay's own, for `walrelay run` and `walrelay recover`.
package leader
