package sink

import (
	"context"
	"errors"
	"testing"
	"time"
)

func testInflight(t *testing.T, maxMsgs, maxBytes int) *inflight {
	t.Helper()
	return newInflight(maxMsgs, maxBytes, privateMetrics())
}

// acquireAsync starts acquire and returns a channel with its result.
func acquireAsync(f *inflight, ctx context.Context, stop chan struct{}, size int) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.acquire(ctx, stop, size) }()
	return done
}

func requireBlocked(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("acquire returned %v; want it blocked", err)
	case <-time.After(20 * time.Millisecond):
	}
}

func requireReturns(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		t.Fatal("acquire still blocked; want it to return")
		return nil
	}
}

func TestInflightMessageBound(t *testing.T) {
	f := testInflight(t, 2, 1000)
	ctx := context.Background()
	for range 2 {
		if err := f.acquire(ctx, nil, 10); err != nil {
			t.Fatal(err)
		}
	}
	done := acquireAsync(f, ctx, nil, 10)
	requireBlocked(t, done)
	f.release(1, 10)
	if err := requireReturns(t, done); err != nil {
		t.Fatalf("acquire = %v; want nil", err)
	}
	if msgs, bytes := f.load(); msgs != 2 || bytes != 20 {
		t.Errorf("load = %d messages, %d bytes; want 2, 20", msgs, bytes)
	}
}

func TestInflightByteBound(t *testing.T) {
	f := testInflight(t, 100, 100)
	ctx := context.Background()
	if err := f.acquire(ctx, nil, 60); err != nil {
		t.Fatal(err)
	}
	done := acquireAsync(f, ctx, nil, 50)
	requireBlocked(t, done)
	f.release(1, 60)
	if err := requireReturns(t, done); err != nil {
		t.Fatalf("acquire = %v; want nil", err)
	}
}

func TestInflightOversizedMessageAloneDoesNotDeadlock(t *testing.T) {
	f := testInflight(t, 100, 100)
	ctx := context.Background()
	if err := requireReturns(t, acquireAsync(f, ctx, nil, 5000)); err != nil {
		t.Fatalf("oversized acquire with nothing in flight = %v; want nil", err)
	}
	done := acquireAsync(f, ctx, nil, 1)
	requireBlocked(t, done) // nothing else while the giant is in flight
	f.release(1, 5000)
	if err := requireReturns(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestInflightGivesUp(t *testing.T) {
	f := testInflight(t, 1, 100)
	if err := f.acquire(context.Background(), nil, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := acquireAsync(f, ctx, nil, 1)
	cancel()
	if err := requireReturns(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire after cancel = %v; want context.Canceled", err)
	}
	stop := make(chan struct{})
	done = acquireAsync(f, context.Background(), stop, 1)
	close(stop)
	if err := requireReturns(t, done); !errors.Is(err, errStopped) {
		t.Errorf("acquire after stop = %v; want errStopped", err)
	}
	if msgs, _ := f.load(); msgs != 1 {
		t.Errorf("load = %d messages; want 1 (failed acquires take nothing)", msgs)
	}
}
