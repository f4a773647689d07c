// Command notifier is the example service that e-mails an order
// confirmation for every order.submitted.v1 message (package orderevents),
// over SMTP, through a durable task in its own PostgreSQL database.
//
// It has two halves that share nothing but the tasks table:
//
//   - The consumer reads the order topic in a consumer group through the
//     inbox (package inbox): in the transaction that records the message as
//     applied, it inserts one row into email_tasks, keyed by the task's own
//     idempotency key "order-confirmation/<order_id>" (INSERT ... ON
//     CONFLICT DO NOTHING). It never talks to SMTP, so an order's message is
//     consumed, and its e-mail owed, while the mail server is down. A crash
//     after the commit loses nothing: the task is in the table, and the
//     redelivered message is recognised by the inbox as a duplicate.
//   - The sender claims one due task at a time (FOR UPDATE SKIP LOCKED; the
//     claim counts the attempt and pushes the task's due time out by a
//     lease, so that another sender, in this process or another, leaves it
//     alone, and a task whose sender died comes back by itself), sends the
//     e-mail, then marks the task sent. When sending fails the task is due
//     again after an exponential backoff with jitter (--retry-min doubled per
//     attempt, capped at --retry-max), with the error in last_error: a mail
//     server that is down means controlled retries, and the e-mail arrives
//     after it is back.
//
// # What "exactly one e-mail" means here
//
// SMTP has no transaction with PostgreSQL: between the server's "250 OK"
// for the message and the UPDATE that marks the task sent, a crash (or a
// lost database connection) leaves a task that is still pending although
// its e-mail went out. After the lease the task is sent again. So the
// notifier sends every e-mail at least once, and more than once only after
// such a crash; it cannot do better without the mail server's help.
//
// What it does guarantee is that every attempt at one task sends the same
// e-mail: the Message-ID is derived from the task key alone (a SHA-256
// prefix @notifier.walrelay.example), and the Date from the task's creation
// time. A duplicate delivery from Kafka never creates a second task (the
// inbox, then the task key, stop it), and a resend after a crash is a second
// copy of the same e-mail, not a second e-mail: mail stores and clients that
// de-duplicate by Message-ID (Gmail does; Thunderbird can) show it once.
// Others show the copy. So: at least one e-mail sent per order, one
// distinct e-mail, and a second copy only after a crash in that window. The
// fault test (test/faults, TestNotifierExactlyOneEmail) counts both the
// copies and the distinct Message-IDs.
//
// An order that can never get an e-mail (no order id, an invalid address, a
// payload that does not parse) is logged at error level and counted
// (notifier_orders_without_email_total); its message is applied without a
// task rather than retried for ever, since the order itself is fine. Every
// SMTP failure, permanent rejections included, is retried with backoff.
//
// Flags: --postgres-url (required: the notifier's own database; the inbox
// and email_tasks tables are created on start), --kafka-brokers, --topic
// (outbox.order), --group and --consumer-id (notifier), --smtp-addr
// (127.0.0.1:2525, plain SMTP), --from, --retry-min (1s), --retry-max (1m),
// --poll-interval (200ms), --lease (30s), --smtp-timeout (10s),
// --session-timeout (30s), --metrics-addr (off), --log-level (info).
//
// In a binary built with -tags failpoints, WALRELAY_FAILPOINT=
// notifier-after-send@N kills the process after the N-th e-mail the SMTP
// server accepted, before the task is marked sent (package failpoint).
package main
