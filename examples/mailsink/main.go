// Command mailsink is a local SMTP server for the demo: it accepts every
// message (no TLS, no authentication, no relaying), logs one line per mail
// and, with --dir, writes each one as <n>.eml. Stop it to play a mail server
// that is down; start it again to let the notifier's e-mails through.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/examples/internal/svc"
	"github.com/walrelay/walrelay/examples/mailsink/smtpsink"
)

func main() { svc.Main("mailsink", run) }

// run serves until ctx ends.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailsink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:2525", "address to accept SMTP on")
	dir := fs.String("dir", "", "folder to write each mail to as <n>.eml (none: keep them in memory only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return fmt.Errorf("create --dir: %w", err)
		}
	}
	log := svc.InfoLogger(stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr
	var n atomic.Int64
	s, err := smtpsink.StartConfig(smtpsink.Config{
		Addr:   *listen,
		OnMail: func(m smtpsink.Mail) { record(log, *dir, n.Add(1), m) },
	})
	if err != nil {
		return err
	}
	log.Info("mailsink listening", zap.String("addr", s.Addr()), zap.String("dir", *dir))
	<-ctx.Done()
	log.Info("mailsink stopping", zap.Int64("mails", n.Load()))
	return s.Close()
}

// record logs one mail and, with dir, writes it to dir/<n>.eml.
func record(log *zap.Logger, dir string, n int64, m smtpsink.Mail) {
	fields := []zap.Field{
		zap.Int64("n", n), zap.String("from", m.From), zap.Strings("to", m.To),
		zap.String("message_id", m.MessageID), zap.String("subject", m.Subject), zap.Int("bytes", len(m.Data)),
	}
	if dir != "" {
		file := filepath.Join(dir, strconv.FormatInt(n, 10)+".eml")
		if err := os.WriteFile(file, m.Data, 0o644); err != nil {
			log.Error("write mail", zap.String("file", file), zap.Error(err))
		}
		fields = append(fields, zap.String("file", file))
	}
	log.Info("mail received", fields...)
}
