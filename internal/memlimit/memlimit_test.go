package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestDefaultMemoryLimitFollowsTheInFlightWindow(t *testing.T) {
	if got, want := Default(16<<20), int64(64<<20); got != want {
		t.Errorf("default window: got %d; want %d", got, want)
	}
	if got, want := Default(100<<20), int64(232<<20); got != want {
		t.Errorf("100 MiB window: got %d; want %d", got, want)
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	env := map[string]string{}
	getenv := func(k string) string { return env[k] }

	debug.SetMemoryLimit(math.MaxInt64)
	limit, set := Apply(getenv, 16<<20)
	if !set || limit != 64<<20 {
		t.Fatalf("GOMEMLIMIT unset: got %d, set %v; want %d set", limit, set, 64<<20)
	}
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("runtime limit after the default: %d", got)
	}

	// GOMEMLIMIT set: the runtime read it at start; walrelay leaves it be
	// and reports what is in force.
	env["GOMEMLIMIT"] = "off"
	debug.SetMemoryLimit(math.MaxInt64)
	limit, set = Apply(getenv, 16<<20)
	if set || limit != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT=off: got %d, set %v; want no limit, not set", limit, set)
	}
	if got := String(limit); got != "off" {
		t.Errorf("log field for no limit: %q", got)
	}
	if got := String(64 << 20); got != "64.0 MiB" {
		t.Errorf("log field for 64 MiB: %q", got)
	}
}
