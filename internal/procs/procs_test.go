package procs

import "testing"

// The policy goes to the most at the first busy tick and back to one after
// calm quiet ticks in a row; a tick between the two bounds, or a busy one,
// starts the count again.
func TestPolicy(t *testing.T) {
	p := NewPolicy(4)
	step := func(used float64, want int) {
		t.Helper()
		if got := p.Next(used); got != want {
			t.Fatalf("Next(%.2f): got %d; want %d", used, got, want)
		}
	}
	step(0.1, 1)
	step(0.79, 1) // under busy: one is enough
	step(0.8, 4)  // busy: the most
	for range calm - 1 {
		step(0.1, 4)
	}
	step(0.5, 4) // neither busy nor idle: the count starts again
	for range calm - 1 {
		step(0.3, 4)
	}
	step(1.5, 4) // busy on the most: stays
	for range calm - 1 {
		step(0.39, 4)
	}
	step(0.39, 1) // calm ticks in a row: one again
	step(0.9, 4)

	p.SetMost(3) // the CPU limit changed while busy: the new most
	step(0.9, 3)
	p.SetMost(1)
	step(0.9, 1)

	if got := NewPolicy(0).Next(2); got != 1 {
		t.Errorf("a policy of at most 0 processors: got %d; want 1", got)
	}
}
