//go:build walrelay_discard

package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
)

func TestDiscardPublisherAcksAtOnce(t *testing.T) {
	var acked []uint64
	pub, err := newPublisher(sink.Config{}, zap.NewNop(), func(token uint64) { acked = append(acked, token) })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pub.Run(context.Background()) }()
	for token := uint64(1); token <= 3; token++ {
		if err := pub.Publish(context.Background(), &schema.Message{}, token); err != nil {
			t.Fatalf("Publish(%d) = %v; want nil", token, err)
		}
	}
	if len(acked) != 3 || acked[0] != 1 || acked[2] != 3 {
		t.Fatalf("acked %v; want [1 2 3]", acked)
	}
	pub.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Close = %v; want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if err := pub.Publish(context.Background(), &schema.Message{}, 4); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Publish after Close = %v; want sink.ErrClosed", err)
	}
}
