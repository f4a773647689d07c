package e2e

import (
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m))
}
