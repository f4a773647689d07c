package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// events is a go test -json stream: a passing test whose output is held
// back, a failing test with a failing subtest, a skip, a build error and
// the package's closing lines.
const events = `{"Action":"build-output","ImportPath":"x/broken","Output":"broken.go:3: undefined: y\n"}
{"Action":"start","Package":"x/p"}
{"Action":"run","Package":"x/p","Test":"TestQuiet"}
{"Action":"output","Package":"x/p","Test":"TestQuiet","Output":"=== RUN   TestQuiet\n"}
{"Action":"output","Package":"x/p","Test":"TestQuiet","Output":"    quiet chatter\n"}
{"Action":"pass","Package":"x/p","Test":"TestQuiet","Elapsed":1.5}
{"Action":"output","Package":"x/p","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"x/p","Test":"TestBad/case","Output":"    bad_test.go:9: got 1, want 2\n"}
{"Action":"fail","Package":"x/p","Test":"TestBad/case","Elapsed":0.25}
{"Action":"output","Package":"x/p","Test":"TestBad","Output":"--- FAIL: TestBad (7.00s)\n"}
{"Action":"fail","Package":"x/p","Test":"TestBad","Elapsed":7}
{"Action":"output","Package":"x/p","Test":"TestSkipped","Output":"--- SKIP: TestSkipped (0.00s)\n"}
{"Action":"skip","Package":"x/p","Test":"TestSkipped","Elapsed":0}
{"Action":"output","Package":"x/p","Output":"FAIL\n"}
{"Action":"output","Package":"x/p","Output":"FAIL\tx/p\t8.800s\n"}
{"Action":"fail","Package":"x/p","Elapsed":8.8}
{"Action":"output","Package":"x/q","Output":"ok  \tx/q\t0.100s\n"}
{"Action":"pass","Package":"x/q","Elapsed":0.1}
`

func TestFilterPrintsWhatPlainGoTestPrints(t *testing.T) {
	file := filepath.Join(t.TempDir(), "r", "p.json")
	var out strings.Builder
	if err := filter(strings.NewReader(events), &out, file, false); err != nil {
		t.Fatal(err)
	}
	want := "broken.go:3: undefined: y\n" +
		"=== RUN   TestBad\n    bad_test.go:9: got 1, want 2\n--- FAIL: TestBad (7.00s)\n" +
		"--- SKIP: TestSkipped (0.00s)\n" +
		"FAIL\nFAIL\tx/p\t8.800s\n" +
		"ok  \tx/q\t0.100s\n"
	if out.String() != want {
		t.Errorf("filter printed\n%s\nwant\n%s", out.String(), want)
	}
	copied, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(copied) != events {
		t.Errorf("the copy differs from the events:\n%s", copied)
	}

	var v strings.Builder
	if err := filter(strings.NewReader(events), &v, file, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.String(), "quiet chatter") {
		t.Errorf("filter -v left out a passing test's output:\n%s", v.String())
	}

	var s strings.Builder
	if err := slowest(&s, 2, []string{file}); err != nil {
		t.Fatal(err)
	}
	wantSlow := "The 2 slowest of 3 tests:\n" +
		"     7.0s  fail  p          x/p TestBad\n" +
		"     1.5s  pass  p          x/p TestQuiet\n"
	if s.String() != wantSlow {
		t.Errorf("slowest printed\n%s\nwant\n%s", s.String(), wantSlow)
	}
}
