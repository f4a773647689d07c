package main

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger writes JSON lines to w at the given level. No sampling: every
// event an operator should see is logged once, not a fraction of them.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "time"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	sink := zapcore.Lock(zapcore.AddSync(w))
	core := flagNamesCore{zapcore.NewCore(zapcore.NewJSONEncoder(ec), sink, lvl)}
	return zap.New(core, zap.ErrorOutput(sink)), nil
}
