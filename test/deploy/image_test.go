package deploy_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit"
)

const dockerfile = "Dockerfile"

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN, ENV, ...
	Args string
}

// stage is one FROM ... [AS name] of a Dockerfile and what follows it.
type stage struct {
	Name, Image string
	Insts       []instruction
}

// loadDockerfile splits the Dockerfile into its stages. It knows the
// instruction syntax this repository uses: comments, backslash continuation.
func loadDockerfile(t *testing.T) []stage {
	t.Helper()
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			s := stage{Image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.Name = f[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) == 0 {
			if in.Cmd != "ARG" {
				t.Fatalf("%s: %s before the first FROM", dockerfile, in.Cmd)
			}
			return
		}
		stages[len(stages)-1].Insts = append(stages[len(stages)-1].Insts, in)
	}
	for _, line := range strings.Split(string(read(t, dockerfile)), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	if len(stages) < 2 {
		t.Fatalf("%s has %d stages; want a build stage and the image", dockerfile, len(stages))
	}
	return stages
}

// find returns the arguments of the stage's instructions of a kind.
func (s stage) find(cmd string) []string {
	var out []string
	for _, in := range s.Insts {
		if in.Cmd == cmd {
			out = append(out, in.Args)
		}
	}
	return out
}

// buildLine returns the build stage's RUN line that builds walrelay, and the
// path it writes, which the final stage copies.
func buildLine(t *testing.T, stages []stage) (run, out string) {
	t.Helper()
	final := stages[len(stages)-1]
	copyFrom := regexp.MustCompile(`^--from=(\S+)\s+(\S+)\s+/walrelay$`)
	var from string
	for _, c := range final.find("COPY") {
		if m := copyFrom.FindStringSubmatch(c); m != nil {
			from, out = m[1], m[2]
		}
	}
	if from == "" {
		t.Fatalf("%s: the final stage copies no /walrelay from a build stage", dockerfile)
	}
	for _, s := range stages[:len(stages)-1] {
		if s.Name != from {
			continue
		}
		for _, r := range s.find("RUN") {
			if strings.Contains(r, "scripts/build.sh") && strings.Contains(r, out) {
				return r, out
			}
		}
	}
	t.Fatalf("%s: stage %q has no RUN line with scripts/build.sh writing %s", dockerfile, from, out)
	return "", ""
}

// runBuild runs a build command in the repository's root, as the build
// stage does (WORKDIR /src after COPY . .), with extra environment.
func runBuild(t *testing.T, name string, args []string, env ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repo(t, ".")
	cmd.Env = append(withoutVar(os.Environ(), "VERSION"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// reportedVersion runs `walrelay version` and returns what follows
// "walrelay ".
func reportedVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").CombinedOutput()
	testkit.Must(t, err, "%s version: %s", bin, out)
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "walrelay ")
	if !ok {
		t.Fatalf("walrelay version printed %q; want \"walrelay <version>\"", out)
	}
	return v
}

// vcsVersion is what scripts/build.sh stamps without VERSION, or "" when the
// repository is not a git checkout here.
func vcsVersion(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = repo(t, ".")
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// assertStatic fails unless bin is a static ELF executable: no program
// interpreter, no shared libraries (distroless static has no libc).
func assertStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	testkit.Must(t, err, "open %s as ELF", bin)
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not a static binary", bin)
		}
	}
	libs, err := f.ImportedLibraries()
	testkit.Must(t, err, "read the libraries of %s", bin)
	if len(libs) > 0 {
		t.Errorf("%s links %v; want a static binary", bin, libs)
	}
}

// The Dockerfile's own build line, run here as its build stage runs it with
// --build-arg VERSION, makes a static binary that reports that version.
func TestImageBuildStampsTheVersion(t *testing.T) {
	run, out := buildLine(t, loadDockerfile(t))
	if !strings.Contains(run, "CGO_ENABLED=0") {
		t.Errorf("%s: the build line %q does not set CGO_ENABLED=0", dockerfile, run)
	}
	bin := filepath.Join(t.TempDir(), "walrelay")
	const want = "v0.0.0-imagetest.1"
	t.Logf("RUN %s", run)
	// A build argument is an environment variable of the RUN lines after it.
	runBuild(t, "sh", []string{"-c", strings.ReplaceAll(run, out, bin)}, "VERSION="+want)
	assertStatic(t, bin)
	if got := reportedVersion(t, bin); got != want {
		t.Fatalf("the image's build with VERSION=%s: walrelay version reports %q; want %q", want, got, want)
	}
	t.Logf("walrelay version: walrelay %s", want)
}

// `make build` stamps the same way: without VERSION, git describe's name of
// the checkout, never "dev".
func TestMakeBuildStampsTheVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	bin := filepath.Join(t.TempDir(), "walrelay")
	runBuild(t, "make", []string{"-s", "build", "BIN=" + bin})
	got := reportedVersion(t, bin)
	if want := vcsVersion(t); want != "" && got != want {
		t.Fatalf("make build: walrelay version reports %q; want git describe's %q", got, want)
	}
	if got == "dev" || got == "" {
		t.Fatalf("make build: walrelay version reports %q; want a stamped version", got)
	}
	t.Logf("make build: walrelay %s", got)
}

var metricsAddr = regexp.MustCompile(`^WALRELAY_METRICS_ADDR=(0\.0\.0\.0:(\d+))$`)

// The image runs as a numeric non-root user, listens for metrics on every
// interface at the port it exposes, and starts walrelay run.
func TestImageRunsAsNonRootWithMetricsExposed(t *testing.T) {
	stages := loadDockerfile(t)
	final := stages[len(stages)-1]
	users := final.find("USER")
	if len(users) == 0 {
		t.Fatalf("%s: the image sets no USER", dockerfile)
	}
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
		t.Errorf("%s: USER %q; want a numeric uid other than 0 (runAsNonRoot can verify only a number)", dockerfile, users[len(users)-1])
	}
	var port string
	for _, e := range final.find("ENV") {
		if m := metricsAddr.FindStringSubmatch(e); m != nil {
			port = m[2]
		}
	}
	if port == "" {
		t.Fatalf("%s: the image does not set WALRELAY_METRICS_ADDR=0.0.0.0:<port>", dockerfile)
	}
	if exposed := final.find("EXPOSE"); len(exposed) != 1 || exposed[0] != port {
		t.Errorf("%s: EXPOSE %q; want %s, the metrics port", dockerfile, exposed, port)
	}
	if !strings.Contains(walrelayHelp(t, "run"), "(WALRELAY_METRICS_ADDR)") {
		t.Errorf("walrelay run -h lists no WALRELAY_METRICS_ADDR")
	}
	if e := final.find("ENTRYPOINT"); len(e) != 1 || e[0] != `["/walrelay"]` {
		t.Errorf("%s: ENTRYPOINT %q; want [\"/walrelay\"]", dockerfile, e)
	}
	if !strings.HasPrefix(final.Image, "gcr.io/distroless/static") {
		t.Errorf("%s: base image %s; want distroless static (CA roots, passwd, no shell)", dockerfile, final.Image)
	}
}
