package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/metadata"
)

// echo answers a metadata request with a cluster id that names the topic
// it was asked for, so that a caller can tell its answer from another's.
func echo(req protocol.Message) protocol.Message {
	m := req.(*metadata.Request)
	return &metadata.Response{ClusterID: "for " + m.TopicNames[0]}
}

func dialFake(t *testing.T, addr string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), Config{DialTimeout: 2 * time.Second}, addr)
	if err != nil {
		t.Fatalf("Dial(%s): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConnGivesEachCallerItsOwnAnswer(t *testing.T) {
	b := startFake(t, echo)
	c := dialFake(t, b.addr())
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			topic := fmt.Sprintf("t%d", i)
			res, err := c.Do(context.Background(), &metadata.Request{TopicNames: []string{topic}})
			switch {
			case err != nil:
				errs <- err
			case res.(*metadata.Response).ClusterID != "for "+topic:
				errs <- fmt.Errorf("asked for %s; got the answer %q", topic, res.(*metadata.Response).ClusterID)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := b.count(protocol.Metadata); got != 200 {
		t.Errorf("broker got %d metadata requests; want 200", got)
	}
}

func TestConnWritesRequestsInCallOrder(t *testing.T) {
	var mu sync.Mutex
	var order []string
	b := startFake(t, func(req protocol.Message) protocol.Message {
		mu.Lock()
		order = append(order, req.(*metadata.Request).TopicNames[0])
		mu.Unlock()
		return echo(req)
	})
	c := dialFake(t, b.addr())
	// Each write returns before the next call starts, the answers are
	// awaited together: the broker must see them in that order.
	var calls []*call
	for i := range 20 {
		cl, err := c.write(context.Background(), &metadata.Request{TopicNames: []string{fmt.Sprint(i)}})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		calls = append(calls, cl)
	}
	for i, cl := range calls {
		r := <-cl.done
		if r.err != nil || r.msg.(*metadata.Response).ClusterID != fmt.Sprintf("for %d", i) {
			t.Fatalf("answer %d: got %v, %v; want the answer for %d", i, r.msg, r.err, i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, got := range order {
		if got != fmt.Sprint(i) {
			t.Fatalf("the broker's request %d was for %s; want %d (order %v)", i, got, i, order)
		}
	}
}

func TestConnClosesWhenAnAnswerIsLate(t *testing.T) {
	b := startFake(t, func(protocol.Message) protocol.Message { return nil }) // never answers
	c := dialFake(t, b.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, &metadata.Request{TopicNames: []string{"x"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do on a broker that never answers: got %v; want context.DeadlineExceeded", err)
	}
	// A late answer could be taken for the next request's: the connection
	// is closed, and says so.
	_, err := c.Do(context.Background(), &metadata.Request{TopicNames: []string{"y"}})
	var cerr *ConnError
	if !errors.As(err, &cerr) || cerr.Addr != b.addr() {
		t.Fatalf("Do after a late answer: got %v; want a *ConnError for %s", err, b.addr())
	}
	if c.Alive(time.Hour) {
		t.Error("Alive after a late answer: got true; want false")
	}
}

func TestConnFailsWaitingCallsWhenTheBrokerGoes(t *testing.T) {
	b := startFake(t, func(protocol.Message) protocol.Message { return nil })
	c := dialFake(t, b.addr())
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Do(context.Background(), &metadata.Request{TopicNames: []string{"x"}})
			errs <- err
		}()
	}
	for b.count(protocol.Metadata) < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	b.dropConns()
	for range 3 {
		var cerr *ConnError
		if err := <-errs; !errors.As(err, &cerr) {
			t.Errorf("a call waiting as the broker went: got %v; want a *ConnError", err)
		}
	}
}

func TestDialRefusedNamesTheAddress(t *testing.T) {
	b := startFake(t, echo)
	addr := b.addr()
	b.close()
	_, err := Dial(context.Background(), Config{DialTimeout: time.Second}, addr)
	if err == nil || !containsAll(err.Error(), "connect to", addr) {
		t.Fatalf("Dial to a closed port: got %v; want an error naming %s", err, addr)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
