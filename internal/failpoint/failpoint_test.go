//go:build !failpoints

package failpoint

import (
	"testing"
)

// Without the failpoints tag, no environment can arm a failpoint.
func TestInjectIsInertWithoutTheTag(t *testing.T) {
	t.Setenv("WALRELAY_FAILPOINT", "publish")
	for range 3 {
		Inject("publish")
	}
}
