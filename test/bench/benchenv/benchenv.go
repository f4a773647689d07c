//go:build bench

// Package benchenv is what the benchmarks (test/bench/...) share: a plain
// build of walrelay, the scale knob, where reports go, and the machine
// facts every report starts with.
package benchenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// Build compiles cmd/walrelay of this checkout into dir/name with the given
// build tags (comma-separated, may be empty). It is a plain build:
// harness.Build adds -race, which would measure the race detector.
func Build(dir, name, tags string) (string, error) {
	return BuildPkg(dir, name, tags, "./cmd/walrelay")
}

// BuildPkg builds the command pkg (a path relative to the repository root)
// as dir/name, with the build tags tags. A command under ./test/ is built
// in the test module (test/go.mod), which holds it since issue 33: the
// root module does not contain it.
func BuildPkg(dir, name, tags, pkg string) (string, error) {
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	moduleDir := rig.RepoRoot()
	if rest, ok := strings.CutPrefix(pkg, "./test/"); ok {
		moduleDir, pkg = filepath.Join(moduleDir, "test"), "./"+rest
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = moduleDir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return out, nil
}

// BuildAt builds ./cmd/walrelay as it was at the git revision rev (a
// commit, tag or branch of this repository) as dir/name: the drain
// benchmark's side-by-side baseline (WALRELAY_BENCH_BASELINE).
func BuildAt(dir, name, rev string) (string, error) {
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", err
	}
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = rig.RepoRoot()
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin, archive.Stderr, untar.Stderr = pipe, os.Stderr, os.Stderr
	if err := untar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", rev, err)
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("unpack %s: %w", rev, err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/walrelay")
	cmd.Dir = src
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s at %s: %w", name, rev, err)
	}
	return out, nil
}

// Scale is WALRELAY_BENCH_SCALE (default 1): it multiplies row counts and
// durations.
func Scale(t *testing.T) float64 {
	v := os.Getenv("WALRELAY_BENCH_SCALE")
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("WALRELAY_BENCH_SCALE=%q: want a positive number", v)
	}
	return f
}

// WriteReport writes md to $WALRELAY_BENCH_OUT_DIR/name (default
// <repo>/.rig/bench), where scripts/bench.sh collects it.
func WriteReport(t *testing.T, name, md string) {
	dir := os.Getenv("WALRELAY_BENCH_OUT_DIR")
	if dir == "" {
		dir = filepath.Join(rig.RepoRoot(), ".rig", "bench")
	}
	testkit.Must(t, os.MkdirAll(dir, 0o755), "create %s", dir)
	path := filepath.Join(dir, name)
	testkit.Must(t, os.WriteFile(path, []byte(md), 0o644), "write %s", path)
	t.Logf("wrote %s", path)
}

// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures: the machine is
// shared, and a busy one slows every run.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// CPUModel is the first "model name" of /proc/cpuinfo.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// PGVersion is the server's version string.
func PGVersion(t *testing.T, pgURL string) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Logf("read the server version: %v", err)
		return "unknown"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		t.Logf("read the server version: %v", err)
		return "unknown"
	}
	return v
}

// kafkaJar finds the broker's version in a running kafka.Kafka's class
// path: a kafka_2.13-<version>.jar, or the rig's libs/<version>/ folder.
var kafkaJar = regexp.MustCompile(`(?:kafka_2\.1[0-9]-|/libs/)([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.\-]*?)(?:\.jar|/)`)

// KafkaVersion is the version of the broker running on this machine, read
// from its command line (Kafka's protocol does not tell it).
func KafkaVersion() string {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "kafka.Kafka") {
			continue
		}
		if m := kafkaJar.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return "unknown"
}
