package deploy_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// service is what the tests read of a docker-compose service.
type service struct {
	Image       string    `yaml:"image"`
	Build       any       `yaml:"build"`
	Command     []string  `yaml:"command"`
	Environment yaml.Node `yaml:"environment"`
	Volumes     []string  `yaml:"volumes"`
}

func loadCompose(t *testing.T) map[string]service {
	t.Helper()
	var f struct {
		Services map[string]service `yaml:"services"`
	}
	testkit.Must(t, yaml.Unmarshal(read(t, composeFile), &f), "parse %s", composeFile)
	if len(f.Services) == 0 {
		t.Fatalf("%s has no services", composeFile)
	}
	return f.Services
}

// env returns a service's environment, given as a map or as a KEY=VALUE
// list (yaml.v3 resolves the anchors and aliases).
func (s service) env(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	n := &s.Environment
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case 0:
	case yaml.MappingNode:
		testkit.Must(t, n.Decode(&out), "decode environment")
	case yaml.SequenceNode:
		var list []string
		testkit.Must(t, n.Decode(&list), "decode environment")
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	default:
		t.Fatalf("environment: unexpected YAML kind %v", n.Kind)
	}
	return out
}

// The stack has what the issue asks for, and every bind mount's host path
// exists in the repository, as a file where the container path names a file.
func TestComposeMountsExist(t *testing.T) {
	services := loadCompose(t)
	for _, name := range []string{"postgres", "kafka", "walrelay-init", "walrelay", "demo-writer", "prometheus", "grafana"} {
		if _, ok := services[name]; !ok {
			t.Errorf("%s has no service %s", composeFile, name)
		}
	}
	mounts := 0
	for name, s := range services {
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			host := parts[0]
			if !strings.HasPrefix(host, ".") && !strings.HasPrefix(host, "/") {
				continue // a named volume
			}
			if len(parts) < 2 {
				t.Errorf("service %s: volume %q has no container path", name, v)
				continue
			}
			mounts++
			fi, err := os.Stat(repo(t, host))
			if err != nil {
				t.Errorf("service %s: bind mount %q: %v", name, v, err)
				continue
			}
			if isFile := filepath.Ext(parts[1]) != ""; isFile == fi.IsDir() {
				t.Errorf("service %s: bind mount %q: host path is a directory: %v; want %v", name, v, fi.IsDir(), !isFile)
			}
		}
	}
	if mounts == 0 {
		t.Fatalf("%s has no bind mounts", composeFile)
	}
}

// The WALRELAY_* variables of the services built from this repository are
// flags of the verb each service runs (as `walrelay VERB -h` lists them), and
// their commands are verbs walrelay knows with flags they have.
func TestComposeWalrelayVariablesAreFlags(t *testing.T) {
	checked := 0
	for name, s := range loadCompose(t) {
		if s.Build == nil {
			continue
		}
		verb, rest := verbOf(s.Command)
		f := flagsOf(t, verb)
		env := s.env(t)
		vars := make([]string, 0, len(env))
		for k := range env {
			vars = append(vars, k)
		}
		sort.Strings(vars)
		for _, p := range append(f.checkVariables(vars), f.checkArgs(rest)...) {
			t.Errorf("service %s: %s", name, p)
		}
		for _, k := range vars {
			if strings.HasPrefix(k, "WALRELAY_") {
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no service built from this repository sets a WALRELAY_* variable")
	}
}

// walrelayHelp runs `walrelay verb -h` in an empty environment and returns
// what it printed; it fails the test unless walrelay exits 0.
func walrelayHelp(t *testing.T, verb ...string) string {
	t.Helper()
	cmd := exec.Command(harness.Binary, append(verb, "-h")...)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("walrelay %s -h: %v\n%s", strings.Join(verb, " "), err, out.String())
	}
	return out.String()
}
