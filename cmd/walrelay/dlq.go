package main

import (
	"context"
	"errors"
	"io"
)

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("dlq: not built yet")
}
