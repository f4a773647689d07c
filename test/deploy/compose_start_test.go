package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit"
	"go.yaml.in/yaml/v3"
)

// startService is what decides the stack's start order on a fresh volume.
type startService struct {
	Restart     string    `yaml:"restart"`
	DependsOn   yaml.Node `yaml:"depends_on"`
	Healthcheck struct {
		Test yaml.Node `yaml:"test"`
	} `yaml:"healthcheck"`
}

// dependsOn returns a service's dependencies with their conditions; the
// short list form means service_started.
func (s startService) dependsOn(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.DependsOn.Kind {
	case 0:
	case yaml.SequenceNode:
		var list []string
		testkit.Must(t, s.DependsOn.Decode(&list), "decode depends_on")
		for _, d := range list {
			out[d] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		testkit.Must(t, s.DependsOn.Decode(&m), "decode depends_on")
		for d, c := range m {
			out[d] = c.Condition
		}
	default:
		t.Fatalf("depends_on: unexpected YAML kind %v", s.DependsOn.Kind)
	}
	return out
}

// healthTest returns the health check's command as its words.
func (s startService) healthTest(t *testing.T) []string {
	t.Helper()
	var list []string
	if s.Healthcheck.Test.Kind == yaml.ScalarNode {
		var str string
		testkit.Must(t, s.Healthcheck.Test.Decode(&str), "decode healthcheck")
		return strings.Fields(str)
	}
	if s.Healthcheck.Test.Kind != 0 {
		testkit.Must(t, s.Healthcheck.Test.Decode(&list), "decode healthcheck")
	}
	return list
}

// checkStartOrder checks a compose file's start order on a fresh volume:
// PostgreSQL is healthy only once it answers on TCP (after the image's init
// scripts, whose temporary server listens on the socket only), walrelay-init
// waits for that and is restarted until it succeeds, and walrelay and the
// demo writer wait for its success.
func checkStartOrder(t *testing.T, what string, doc []byte) {
	t.Helper()
	var f struct {
		Services map[string]startService `yaml:"services"`
	}
	testkit.Must(t, yaml.Unmarshal(doc, &f), "parse %s", what)
	pg := f.Services["postgres"].healthTest(t)
	if h := slices.Index(pg, "-h"); !slices.Contains(pg, "pg_isready") || h < 0 || h+1 >= len(pg) || pg[h+1] != "127.0.0.1" {
		t.Errorf("%s: postgres health check %q; want pg_isready -h 127.0.0.1 (TCP, not the socket)", what, pg)
	}
	initSvc := f.Services["walrelay-init"]
	if r := initSvc.Restart; r != "on-failure" && !strings.HasPrefix(r, "on-failure:") {
		t.Errorf("%s: walrelay-init restart %q; want on-failure", what, r)
	}
	if c := initSvc.dependsOn(t)["postgres"]; c != "service_healthy" {
		t.Errorf("%s: walrelay-init depends on postgres with %q; want service_healthy", what, c)
	}
	for _, name := range []string{"walrelay", "demo-writer"} {
		if c := f.Services[name].dependsOn(t)["walrelay-init"]; c != "service_completed_successfully" {
			t.Errorf("%s: %s depends on walrelay-init with %q; want service_completed_successfully", what, name, c)
		}
	}
}

// The file as written starts in the right order.
func TestComposeStartOrder(t *testing.T) {
	checkStartOrder(t, composeFile, read(t, composeFile))
}

// dockerCompose returns the path of docker-compose from
// scripts/docker-compose.sh, which installs Debian's package when missing.
// Under -short outside CI it only looks, and the test skips when there is
// none.
func dockerCompose(t *testing.T) string {
	t.Helper()
	lookOnly := testing.Short() && !inCI()
	cmd := exec.Command(repo(t, "scripts/docker-compose.sh"))
	if lookOnly {
		cmd.Env = append(os.Environ(), "WALRELAY_COMPOSE_NO_INSTALL=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if lookOnly {
			t.Skipf("docker-compose is not installed (scripts/docker-compose.sh installs it): %s", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("scripts/docker-compose.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// docker-compose (Debian's 1.29.2) accepts the file, and what it resolves
// (anchors, merge keys, defaults) keeps the start order. It needs no engine.
func TestComposeConfigValidates(t *testing.T) {
	cmd := exec.Command(dockerCompose(t), "-f", composeFile, "config")
	cmd.Dir = repo(t, ".")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker-compose -f %s config: %v\n%s", composeFile, err, stderr.String())
	}
	if w := strings.TrimSpace(stderr.String()); w != "" {
		t.Logf("docker-compose config warns:\n%s", w)
	}
	checkStartOrder(t, "docker-compose config", stdout.Bytes())
	t.Logf("docker-compose -f %s config: ok (%d bytes resolved)", composeFile, stdout.Len())
}
