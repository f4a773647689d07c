// Command walrelay publishes committed outbox rows from PostgreSQL's
// write-ahead log to Kafka. See README.md for the guarantees and the
// configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/walrelay/walrelay/internal/flagset"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal a second one kills the process at once.
	context.AfterFunc(ctx, stop)
	stopProfile := startProfile()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	stopProfile()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "walrelay: %v\n", err)
		}
		os.Exit(exitCode(err))
	}
}

// errUsage marks a command line that was wrong; the usage was printed.
var errUsage = flagset.ErrUsage

// errConfig marks settings that are missing or wrong, found before
// anything was connected to: exit 2 as a wrong command line is, with the
// one line `walrelay: <reason>` instead of the usage.
var errConfig = errors.New("configuration")

// configError is an error of the settings (errConfig).
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{e.err, errConfig} }

// asConfigError marks err, when not nil, as an error of the settings.
func asConfigError(err error) error {
	if err == nil || errors.Is(err, errUsage) {
		return err
	}
	return configError{err}
}

// exitCode is the process's exit status for err (README "Exit codes",
// DECISIONS 35): 2 for a wrong command line or settings, 1 for anything
// that failed after them (a server, a check, the data).
func exitCode(err error) int {
	if errors.Is(err, errUsage) || errors.Is(err, errConfig) {
		return 2
	}
	return 1
}

const usage = `walrelay publishes committed outbox rows from the PostgreSQL WAL to Kafka.

Usage:
  walrelay run      [flags]   stream the outbox to Kafka until stopped (SIGTERM/SIGINT)
  walrelay init     [flags]   create the publication, the replication slot and walrelay's tables (safe to repeat)
  walrelay check    [flags]   check PostgreSQL and Kafka settings and privileges: ok / warn / fail
  walrelay status   [flags]   show the slot, its lag, the publication and the leader (--json for scripts)
  walrelay schema   [flags]   print the outbox DDL for your migrations (--existing: only what goes beside your table)
  walrelay dlq      list|retry|discard [flags]
                              the dead-letter table: list parked messages, publish them again, discard them
  walrelay recover  --since TIME | --since-message-id ID | --all [flags]
                              after a lost slot: a new slot, and the outbox rows it missed published from the table
  walrelay replay   [--since TIME] [--aggregate-type T] [--to-topic T] [flags]
                              publish retained outbox rows again (marked walrelay_replay), without touching the slot
  walrelay topics   list|accept --topic T [flags]
                              the partition count each topic is routed by; accept Kafka's after a topic was grown
  walrelay prune    --retention 168h [flags]
                              delete outbox rows older than the period that the slot has confirmed, in batches
  walrelay version            print the version

Each verb has its own flags: run 'walrelay VERB -h' (or 'walrelay dlq list -h') for them.
A flag has an environment variable, --slot is WALRELAY_SLOT, unless -h says
"command line only" (what a destructive command acts on). A flag on the command line
wins over its variable; a variable of a flag the verb does not have is ignored.
`

// run dispatches a verb. It is main without the process: testable. Its
// error names walrelay's flags where the packages named their settings.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return flagged(dispatch(ctx, args, stdout, stderr))
}

// verbs are the commands, by name.
var verbs = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"run":     runRelay,
	"init":    runInit,
	"check":   runCheck,
	"status":  runStatus,
	"dlq":     runDLQ,
	"schema":  runSchema,
	"prune":   runPrune,
	"recover": runRecover,
	"replay":  runReplay,
	"topics":  runTopics,
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	verb, rest := args[0], args[1:]
	if run, ok := verbs[verb]; ok {
		return run(ctx, rest, stdout, stderr)
	}
	switch verb {
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "walrelay", version())
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "walrelay: unknown command %q\n\n%s", verb, usage)
	return errUsage
}
