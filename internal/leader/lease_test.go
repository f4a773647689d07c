package leader

import (
	"errors"
	"testing"
	"time"
)

func TestLease(t *testing.T) {
	l := newLease(5 * time.Second)
	t0 := l.epoch.Add(time.Minute)
	if err := l.check(t0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("before renew: got %v; want ErrNotLeader", err)
	}
	l.renew(t0)
	steps := []struct {
		at   time.Duration
		want error
	}{
		{0, nil},
		{4999 * time.Millisecond, nil},
		{5 * time.Second, ErrLeaseExpired},
		{time.Hour, ErrLeaseExpired},
	}
	for _, s := range steps {
		if err := l.check(t0.Add(s.at)); !errors.Is(err, s.want) {
			t.Errorf("check at +%s: got %v; want %v", s.at, err, s.want)
		}
	}
	if !errors.Is(ErrLeaseExpired, ErrNotLeader) {
		t.Errorf("ErrLeaseExpired does not match ErrNotLeader")
	}
	l.renew(t0.Add(10 * time.Second))
	if err := l.check(t0.Add(11 * time.Second)); err != nil {
		t.Errorf("after renew: got %v; want nil", err)
	}
	l.revoke()
	if err := l.check(t0.Add(11 * time.Second)); !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLeaseExpired) {
		t.Errorf("after revoke: got %v; want ErrNotLeader", err)
	}
}

// A renewal whose proof was sent long ago (the process paused between
// sending the check and reading its answer) grants nothing.
func TestLeaseRenewFromStaleProof(t *testing.T) {
	l := newLease(time.Second)
	sent := l.epoch.Add(time.Minute)
	l.renew(sent)
	if err := l.check(sent.Add(3 * time.Second)); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("got %v; want ErrLeaseExpired", err)
	}
}
