// Package check is the vocabulary of `walrelay check`: a Result says what
// one check of a setting, privilege or object found, whether that is fine
// (OK), risky (Warn) or stops walrelay from working (Fail), and, when it is
// not fine, the fix in one sentence. A Report is the results in the order
// they were made; it renders as an aligned table for people and as JSON for
// scripts, and Failed tells whether the preflight as a whole fails.
//
// The package only describes results; it performs no checks. The packages
// that own a system check it: slot checks PostgreSQL (with the same rules
// its preflight refuses on), dlq the dead-letter table, sink Kafka, and
// cmd/walrelay puts their results into one Report. It imports no other
// walrelay package but texttable, which aligns its table as every table
// walrelay prints is aligned.
//
// A check that could not be made is not reported as passed: a preflight that
// cannot reach a server reports that as a failure and leaves out the checks
// that needed the server, rather than guessing their outcome.
//
// Internal: walrelay's own, shared by the packages whose checks `walrelay
// check` composes.
package check
