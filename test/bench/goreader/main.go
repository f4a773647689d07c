//go:build bench

// Command goreader is the drain benchmark's minimal pgoutput client, the
// other baseline beside pg_recvlogical for the CPU a walsender spends per
// message (issue 21): it starts replication on a slot, reads every message
// with pgproto3's frontend (no context per message, no decoding), answers
// the keepalives that ask for a reply, and exits at the end position,
// confirming it.
//
//	goreader -url URL -slot S -publication P -endpos LSN [-option "binary 'true'"]...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func main() {
	url := flag.String("url", "", "PostgreSQL URL")
	slot := flag.String("slot", "", "logical replication slot (pgoutput)")
	pub := flag.String("publication", "", "publication")
	end := flag.String("endpos", "", "stop at this WAL position")
	var options pluginArgs
	flag.Var(&options, "option", "a further pgoutput option, as START_REPLICATION takes it (repeatable): \"binary 'true'\"")
	flag.Parse()
	n, err := run(context.Background(), *url, *slot, *pub, *end, options)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goreader:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "goreader: %d messages\n", n)
}

// pluginArgs collects -option flags.
type pluginArgs []string

func (p *pluginArgs) String() string     { return strings.Join(*p, ", ") }
func (p *pluginArgs) Set(v string) error { *p = append(*p, v); return nil }

func run(ctx context.Context, url, slot, pub, endText string, options []string) (int, error) {
	end, err := pglogrepl.ParseLSN(endText)
	if err != nil {
		return 0, err
	}
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return 0, err
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	args := []string{"proto_version '1'", "publication_names '" + pub + "'"}
	for _, o := range options {
		if strings.HasPrefix(o, "proto_version") {
			args[0] = o // the version asked for instead of 1
		} else {
			args = append(args, o)
		}
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: args})
	if err != nil {
		return 0, err
	}
	var at pglogrepl.LSN // the last position read
	n := 0
	for at < end {
		msg, err := conn.Frontend().Receive()
		if err != nil {
			return n, err
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			switch m.Data[0] {
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return n, err
				}
				n++
				at = max(at, xld.WALStart)
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return n, err
				}
				if pkm.ServerWALEnd >= end {
					at = max(at, pkm.ServerWALEnd) // sent everything up to the end
				}
				if pkm.ReplyRequested {
					if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: at}); err != nil {
						return n, err
					}
				}
			}
		case *pgproto3.ErrorResponse:
			return n, pgconn.ErrorResponseToPgError(m)
		}
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: end}); err != nil {
		return n, err
	}
	_, err = pglogrepl.SendStandbyCopyDone(ctx, conn)
	return n, err
}
