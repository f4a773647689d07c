package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// startEcho runs a TCP echo server on loopback until the test ends.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c) //nolint:errcheck // ends when either side closes
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// startProxy starts a proxy to target; at the end of the test it closes it
// and checks that none of its goroutines is left.
func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checkNoGoroutines(t)
	})
	return p
}

// checkNoGoroutines fails if any goroutine runs code of a Proxy. Close
// waits for them, so none may be left right after it returns.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	// A goroutine that has called wg.Done may still be on its way out when
	// Wait returns: give the stragglers a moment before calling it a leak.
	var left []string
	if poll.Until(2*time.Second, 10*time.Millisecond, func() bool {
		left = proxyGoroutines()
		return len(left) == 0
	}) {
		return
	}
	for _, g := range left {
		t.Errorf("goroutine left after Close:\n%s", g)
	}
}

// proxyGoroutines are the stacks of the goroutines running proxy code.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultproxy.(*Proxy)") {
			left = append(left, g)
		}
	}
	return left
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back from the echo server.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	expectRead(t, c, msg)
}

func expectRead(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(got) != want {
		t.Fatalf("read %q; want %q", got, want)
	}
}

// expectClosed checks that c is closed by its peer promptly: a read ends
// with EOF or a reset, not with the deadline.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the peer closed: got %v; want EOF or a reset", err)
	}
}

// expectRefused checks that a connection to addr is accepted and closed at
// once. On loopback the reset can beat the dialer, so a failed dial counts.
func expectRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	expectClosed(t, c)
}

// expectHeld checks that nothing arrives on c for 200ms.
func expectHeld(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	n, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during a stall: got %d bytes, %v; want a timeout", n, err)
	}
}

func waitConns(t *testing.T, p *Proxy, want int) {
	t.Helper()
	poll.EventuallyEvery(t, 2*time.Second, 5*time.Millisecond, fmt.Sprintf("Conns() = %d", want), func() (string, bool) {
		got := p.Conns()
		return fmt.Sprintf("Conns() = %d", got), got == want
	})
}

func TestForward(t *testing.T) {
	p := startProxy(t, startEcho(t))
	c := dial(t, p.Addr())
	roundTrip(t, c, "hello")
	roundTrip(t, c, "world")
	waitConns(t, p, 1)

	// A half close reaches the echo server, which ends, and its end comes back.
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after half close: got %d bytes, %v; want EOF", n, err)
	}
	waitConns(t, p, 0)
}

func TestCutClosesAndRefuses(t *testing.T) {
	p := startProxy(t, startEcho(t))
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")

	p.Cut()
	expectClosed(t, a)
	expectClosed(t, b)
	if n := p.Conns(); n != 0 {
		t.Fatalf("Conns() after Cut = %d; want 0", n)
	}
	for range 3 {
		expectRefused(t, p.Addr())
	}

	p.Restore()
	roundTrip(t, dial(t, p.Addr()), "back")
}

func TestStallHoldsBytesInOrder(t *testing.T) {
	p := startProxy(t, startEcho(t))
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")

	p.Stall()
	if _, err := c.Write([]byte("held-1,")); err != nil {
		t.Fatal(err)
	}
	expectHeld(t, c)
	if _, err := c.Write([]byte("held-2")); err != nil {
		t.Fatal(err)
	}
	late := dial(t, p.Addr()) // accepted, not dialed to the target yet
	if _, err := late.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	expectHeld(t, late)
	waitConns(t, p, 2)

	p.Restore()
	expectRead(t, c, "held-1,held-2")
	expectRead(t, late, "late")
	roundTrip(t, c, "after")
}

// TestStallHoldsLargeStream stalls with more bytes in flight than the
// proxy's buffer and the socket buffers hold, so the writer is pushed back,
// and checks every byte arrives in order after Restore.
func TestStallHoldsLargeStream(t *testing.T) {
	p := startProxy(t, startEcho(t))
	c := dial(t, p.Addr())
	payload := make([]byte, 32<<20)
	rand.Read(payload)

	p.Stall()
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		wrote <- err
	}()
	expectHeld(t, c)
	select {
	case err := <-wrote:
		t.Fatalf("write of %d bytes finished during a stall (err %v); want it held back", len(payload), err)
	default:
	}

	p.Restore()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("bytes after Restore differ from the bytes written")
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
}

func TestCutDuringStall(t *testing.T) {
	p := startProxy(t, startEcho(t))
	c := dial(t, p.Addr())
	roundTrip(t, c, "x")
	p.Stall()
	pending := dial(t, p.Addr())
	waitConns(t, p, 2)

	p.Cut()
	expectClosed(t, c)
	expectClosed(t, pending)
	waitConns(t, p, 0)
}

func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()

	p := startProxy(t, target)
	expectRefused(t, p.Addr())
	waitConns(t, p, 0)
}

func TestCloseEndsEverything(t *testing.T) {
	p, err := Start("127.0.0.1:0", startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	live := dial(t, p.Addr())
	roundTrip(t, live, "live")
	p.Stall()
	held := dial(t, p.Addr())
	if _, err := live.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	waitConns(t, p, 2)

	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	checkNoGoroutines(t)
	expectClosed(t, live)
	expectClosed(t, held)
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("dial after Close succeeded; want refused")
	}
}
