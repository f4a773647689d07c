package main

import (
	"context"
	"errors"
	"io"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("status: not built yet")
}
