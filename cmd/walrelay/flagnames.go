package main

import (
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// settingFlags pairs each setting the packages name in errors and fixes
// with the flag that sets it (or the command that prints it): packages
// speak of their own settings, every line walrelay writes (error, report,
// log) speaks of its flags.
var settingFlags = [][2]string{
	{slot.SettingConnString, "--postgres-url"},
	{slot.SettingReplicationConnString, "--replication-url"},
	{slot.SettingSlot, "--slot"},
	{slot.SettingTable, "--table"},
	{slot.SettingMaxMessageBytes, "--max-wal-message-bytes"},
	{slot.SettingSSLMode, "--postgres-sslmode"},
	{slot.SettingSSLRootCert, "--postgres-sslrootcert"},
	{slot.SettingSSLCert, "--postgres-sslcert"},
	{slot.SettingSSLKey, "--postgres-sslkey"},
	{slot.SettingPasswordFile, "--postgres-password-file"},
	{schema.SettingDeadLetters, "--dead-letter-table"},
	{schema.SettingTable, "--table"},
	{schema.FieldMessageID.Setting(), "--column-message-id"},
	{schema.FieldAggregateType.Setting(), "--column-aggregate-type"},
	{schema.FieldAggregateID.Setting(), "--column-aggregate-id"},
	{schema.FieldAggregateVersion.Setting(), "--column-aggregate-version"},
	{schema.FieldType.Setting(), "--column-type"},
	{schema.FieldPayload.Setting(), "--column-payload"},
	{schema.FieldHeaders.Setting(), "--column-headers"},
	{schema.FieldOccurredAt.Setting(), "--column-occurred-at"},
	{schema.FieldTopic.Setting(), "--column-topic"},
	{decoder.SettingAggregateTypeDefault, "--aggregate-type-default"},
	// Longer names first: a replacer tries its pairs in order.
	{decoder.SettingContentTypeColumn, "--column-content-type"},
	{decoder.SettingContentType, "--content-type"},
	{decoder.SettingNullPayload, "--null-payload"},
	{decoder.SettingSpanContext, "--column-tracing-span-context"},
	{sink.SettingMessageIDHeader, "--message-id-header"},
	{sink.SettingCompression, "--kafka-compression"},
	{sink.SettingIdempotence, "--kafka-idempotence"},
	// Longer names first: a replacer tries its pairs in order.
	{sink.SettingTLSTrust, "--kafka-tls-ca-file, --kafka-tls-server-name"},
	{sink.SettingClientCert, "--kafka-tls-cert-file, --kafka-tls-key-file"},
	{sink.SettingTLS, "--kafka-tls"},
	{sink.SettingSASL, "--kafka-sasl-mechanism, --kafka-sasl-username, --kafka-sasl-password or --kafka-sasl-password-file"},
	{sink.SettingBrokers, "--kafka-brokers"},
	{schema.GrantsForRole, "`walrelay schema --grant-to <role>`"},
}

var flagNames = func() *strings.Replacer {
	var pairs []string
	for _, sf := range settingFlags {
		pairs = append(pairs, sf[0], sf[1])
	}
	return strings.NewReplacer(pairs...)
}()

// withFlags says the settings s names as walrelay's flags.
func withFlags(s string) string { return flagNames.Replace(s) }

// flagError is an error as walrelay reports it: the settings it names said
// as flags. Unwrap keeps the package's error for errors.Is and As.
type flagError struct{ err error }

func (e *flagError) Error() string { return withFlags(e.err.Error()) }
func (e *flagError) Unwrap() error { return e.err }

// flagged wraps err as a *flagError; nil stays nil.
func flagged(err error) error {
	if err == nil {
		return nil
	}
	return &flagError{err}
}

// reportWithFlags is r with the settings its found and fix texts name said
// as flags.
func reportWithFlags(r check.Report) check.Report {
	out := make(check.Report, len(r))
	for i, res := range r {
		res.Found, res.Fix = withFlags(res.Found), withFlags(res.Fix)
		out[i] = res
	}
	return out
}

// flagNamesCore writes log entries with the settings their message, string
// and error fields name said as flags: the packages log in their own terms
// (a relay halted on a row over slot.Config.MaxMessageBytes).
type flagNamesCore struct{ zapcore.Core }

func (c flagNamesCore) With(fs []zapcore.Field) zapcore.Core {
	return flagNamesCore{c.Core.With(fieldsWithFlags(fs))}
}

func (c flagNamesCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c flagNamesCore) Write(ent zapcore.Entry, fs []zapcore.Field) error {
	ent.Message = withFlags(ent.Message)
	return c.Core.Write(ent, fieldsWithFlags(fs))
}

// fieldsWithFlags rewrites the string and error fields that name a
// setting; the others, and fields that name none, are kept as they are.
func fieldsWithFlags(fs []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i, f := range fs {
		g, changed := fieldWithFlags(f)
		if changed && out == nil {
			out = append(make([]zapcore.Field, 0, len(fs)), fs[:i]...)
		}
		if out != nil {
			out = append(out, g)
		}
	}
	if out == nil {
		return fs
	}
	return out
}

func fieldWithFlags(f zapcore.Field) (zapcore.Field, bool) {
	var text string
	switch f.Type {
	case zapcore.StringType:
		text = f.String
	case zapcore.ErrorType:
		err, ok := f.Interface.(error)
		if !ok || err == nil {
			return f, false
		}
		text = err.Error()
	default:
		return f, false
	}
	if said := withFlags(text); said != text {
		return zap.String(f.Key, said), true
	}
	return f, false
}
