package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/walrelay/walrelay/internal/testkit"
)

const k8sDir = "deploy/kubernetes"

// kustomization is the part of kustomize's Kustomization the folder uses;
// decoded strictly like the rest, so a misspelt field fails.
type kustomization struct {
	APIVersion         string   `json:"apiVersion"`
	Kind               string   `json:"kind"`
	Namespace          string   `json:"namespace"`
	Resources          []string `json:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// manifests is every object of deploy/kubernetes, decoded into its API type.
type manifests struct {
	kust        kustomization
	files       map[string]string // file -> kind
	namespaces  []*corev1.Namespace
	configMaps  map[string]*corev1.ConfigMap
	deployments []*appsv1.Deployment
	pdbs        []*policyv1.PodDisruptionBudget
	jobs        []*batchv1.Job
	cronJobs    []*batchv1.CronJob
	podMonitors []*monitoringv1.PodMonitor
}

// decodeStrict decodes one YAML document into obj, failing on unknown and
// duplicate fields (sigs.k8s.io/yaml's strict mode: JSON with
// DisallowUnknownFields), and checks its apiVersion and kind.
func decodeStrict(t *testing.T, file string, doc []byte, obj any, gvk metav1.TypeMeta) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %s %s: %v", file, gvk.APIVersion, gvk.Kind, err)
	}
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{files: map[string]string{}, configMaps: map[string]*corev1.ConfigMap{}}
	paths, err := filepath.Glob(repo(t, k8sDir+"/*.yaml"))
	testkit.Must(t, err, "list %s", k8sDir)
	if len(paths) == 0 {
		t.Fatalf("%s has no manifests", k8sDir)
	}
	for _, p := range paths {
		file := filepath.Base(p)
		b, err := os.ReadFile(p)
		testkit.Must(t, err, "read %s", p)
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			m.add(t, file, []byte(doc))
		}
	}
	return m
}

// add decodes one document by its apiVersion and kind.
func (m *manifests) add(t *testing.T, file string, doc []byte) {
	t.Helper()
	var tm metav1.TypeMeta
	testkit.Must(t, yaml.Unmarshal(doc, &tm), "%s: read apiVersion and kind", file)
	m.files[file] = tm.Kind
	switch tm.APIVersion + " " + tm.Kind {
	case "kustomize.config.k8s.io/v1beta1 Kustomization":
		decodeStrict(t, file, doc, &m.kust, tm)
	case "v1 Namespace":
		var o corev1.Namespace
		decodeStrict(t, file, doc, &o, tm)
		m.namespaces = append(m.namespaces, &o)
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		decodeStrict(t, file, doc, &o, tm)
		m.configMaps[o.Name] = &o
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		decodeStrict(t, file, doc, &o, tm)
		m.deployments = append(m.deployments, &o)
	case "policy/v1 PodDisruptionBudget":
		var o policyv1.PodDisruptionBudget
		decodeStrict(t, file, doc, &o, tm)
		m.pdbs = append(m.pdbs, &o)
	case "batch/v1 Job":
		var o batchv1.Job
		decodeStrict(t, file, doc, &o, tm)
		m.jobs = append(m.jobs, &o)
	case "batch/v1 CronJob":
		var o batchv1.CronJob
		decodeStrict(t, file, doc, &o, tm)
		m.cronJobs = append(m.cronJobs, &o)
	case "monitoring.coreos.com/v1 PodMonitor":
		var o monitoringv1.PodMonitor
		decodeStrict(t, file, doc, &o, tm)
		m.podMonitors = append(m.podMonitors, &o)
	default:
		t.Fatalf("%s: %s %s is not a kind this test knows; add it to manifests.add", file, tm.APIVersion, tm.Kind)
	}
}

// podSpec is a pod template with where it comes from.
type podSpec struct {
	Owner string
	Spec  *corev1.PodSpec
}

func (m manifests) podSpecs() []podSpec {
	var out []podSpec
	for _, d := range m.deployments {
		out = append(out, podSpec{"Deployment " + d.Name, &d.Spec.Template.Spec})
	}
	for _, j := range m.jobs {
		out = append(out, podSpec{"Job " + j.Name, &j.Spec.Template.Spec})
	}
	for _, c := range m.cronJobs {
		out = append(out, podSpec{"CronJob " + c.Name, &c.Spec.JobTemplate.Spec.Template.Spec})
	}
	return out
}

// isWalrelay tells a container of the walrelay image (kustomization's images
// entry replaces the name).
func isWalrelay(c corev1.Container) bool {
	name, _, _ := strings.Cut(c.Image, ":")
	return name == "walrelay"
}

func (m manifests) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	if len(m.deployments) != 1 {
		t.Fatalf("%s has %d Deployments; want 1", k8sDir, len(m.deployments))
	}
	return m.deployments[0]
}

func mustContainer(t *testing.T, spec *corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// Every file decodes strictly into its API type, and the kustomization
// lists every manifest but the optional PodMonitor.
func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	names := make([]string, 0, len(m.files))
	for f, kind := range m.files {
		names = append(names, f+" ("+kind+")")
	}
	sort.Strings(names)
	t.Logf("decoded strictly: %s", strings.Join(names, ", "))
	if m.kust.Kind == "" {
		t.Fatalf("%s has no kustomization.yaml", k8sDir)
	}
	for _, r := range m.kust.Resources {
		if _, ok := m.files[r]; !ok {
			t.Errorf("kustomization.yaml lists %s, which is not a manifest of %s", r, k8sDir)
		}
	}
	for f, kind := range m.files {
		if kind != "Kustomization" && kind != "PodMonitor" && !slices.Contains(m.kust.Resources, f) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
	for _, g := range m.kust.ConfigMapGenerator {
		for _, f := range g.Files {
			if _, err := os.Stat(repo(t, k8sDir+"/"+f)); err != nil {
				t.Errorf("configMapGenerator %s: %v", g.Name, err)
			}
		}
	}
	if len(m.pdbs) != 1 || len(m.jobs) != 1 || len(m.cronJobs) != 1 || len(m.podMonitors) != 1 {
		t.Errorf("got %d PodDisruptionBudgets, %d Jobs, %d CronJobs, %d PodMonitors; want 1 each",
			len(m.pdbs), len(m.jobs), len(m.cronJobs), len(m.podMonitors))
	}
}

// Every walrelay container runs a verb walrelay knows, with flags and
// WALRELAY_* variables that verb has; its ConfigMap keys exist, and each
// password file lies in a mounted Secret.
func TestKubernetesWalrelayVariablesAreFlags(t *testing.T) {
	m := loadManifests(t)
	verbs := map[string]verbFlags{}
	checked := 0
	for _, ps := range m.podSpecs() {
		for _, c := range append(slices.Clone(ps.Spec.InitContainers), ps.Spec.Containers...) {
			where := ps.Owner + " container " + c.Name
			checkConfigMapRefs(t, m, where, c)
			if !isWalrelay(c) {
				continue
			}
			if len(c.Command) > 0 {
				t.Errorf("%s: command %q replaces the image's entrypoint /walrelay; use args", where, c.Command)
			}
			verb, rest := verbOf(c.Args)
			f, ok := verbs[verb]
			if !ok {
				f = flagsOf(t, verb)
				verbs[verb] = f
			}
			var vars []string
			for _, e := range c.Env {
				vars = append(vars, e.Name)
			}
			for _, p := range append(f.checkVariables(vars), f.checkArgs(rest)...) {
				t.Errorf("%s: %s", where, p)
			}
			checked += len(vars)
			checkPasswordFiles(t, where, ps.Spec, c)
		}
	}
	if len(verbs) < 3 {
		t.Errorf("walrelay containers run %d verbs; want run, init and prune", len(verbs))
	}
	t.Logf("checked %d variables of the verbs %v", checked, keys(verbs))
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func checkConfigMapRefs(t *testing.T, m manifests, where string, c corev1.Container) {
	t.Helper()
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.ConfigMapKeyRef
		cm, ok := m.configMaps[ref.Name]
		if !ok {
			t.Errorf("%s: %s refers to ConfigMap %s, which %s lacks", where, e.Name, ref.Name, k8sDir)
			continue
		}
		if _, ok := cm.Data[ref.Key]; !ok {
			t.Errorf("%s: %s refers to key %s, which ConfigMap %s lacks", where, e.Name, ref.Key, ref.Name)
		}
	}
}

// checkPasswordFiles: each *_PASSWORD_FILE is a file under a read-only
// mount of a Secret volume of the pod.
func checkPasswordFiles(t *testing.T, where string, spec *corev1.PodSpec, c corev1.Container) {
	t.Helper()
	secrets := map[string]string{}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	for _, e := range c.Env {
		if !strings.HasSuffix(e.Name, "_PASSWORD_FILE") {
			continue
		}
		found := false
		for _, vm := range c.VolumeMounts {
			if _, ok := secrets[vm.Name]; ok && vm.ReadOnly && filepath.Dir(e.Value) == vm.MountPath {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %s=%s is not in a read-only mounted Secret", where, e.Name, e.Value)
		}
	}
	if _, ok := envValue(c, "WALRELAY_POSTGRES_PASSWORD_FILE"); !ok {
		t.Errorf("%s: no WALRELAY_POSTGRES_PASSWORD_FILE: the password belongs in a Secret's file", where)
	}
}

// Every pod runs as non-root with a read-only root file system, no
// privilege escalation and no capabilities, and asks for resources.
func TestKubernetesPodsAreLockedDown(t *testing.T) {
	for _, ps := range loadManifests(t).podSpecs() {
		sc := ps.Spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("%s: pod securityContext %+v; want runAsNonRoot and a non-zero runAsUser", ps.Owner, sc)
		}
		if ps.Spec.AutomountServiceAccountToken == nil || *ps.Spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service account token walrelay never uses", ps.Owner)
		}
		for _, c := range append(slices.Clone(ps.Spec.InitContainers), ps.Spec.Containers...) {
			where := ps.Owner + " container " + c.Name
			s := c.SecurityContext
			switch {
			case s == nil:
				t.Errorf("%s: no securityContext", where)
				continue
			case s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem:
				t.Errorf("%s: root file system is writable", where)
			case s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation:
				t.Errorf("%s: allows privilege escalation", where)
			case s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) > 0:
				t.Errorf("%s: capabilities %+v; want drop [ALL]", where, s.Capabilities)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", where, r)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: no memory limit", where)
			}
		}
	}
}

// The Deployment: 2 replicas (leader and standby), probes on the metrics
// port walrelay listens on, the scrape annotations on the same port, and a
// soft memory limit that fits the in-flight window and the container.
func TestKubernetesDeployment(t *testing.T) {
	m := loadManifests(t)
	d := m.deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("Deployment %s: replicas %v; want 2 (one leader, one standby)", d.Name, d.Spec.Replicas)
	}
	c := mustContainer(t, &d.Spec.Template.Spec, "walrelay")
	addr, ok := envValue(c, "WALRELAY_METRICS_ADDR")
	if !ok {
		t.Fatalf("container walrelay sets no WALRELAY_METRICS_ADDR")
	}
	host, port, _ := strings.Cut(addr, ":")
	if host != "0.0.0.0" && host != "" {
		t.Errorf("WALRELAY_METRICS_ADDR=%s: kubelet and Prometheus reach the pod's IP, not loopback", addr)
	}
	var named string
	for _, p := range c.Ports {
		if p.Name == "metrics" && p.ContainerPort > 0 {
			named = p.Name
			if got := resource.MustParse(port); got.Value() != int64(p.ContainerPort) {
				t.Errorf("port metrics is %d; walrelay listens on %s", p.ContainerPort, port)
			}
		}
	}
	if named == "" {
		t.Fatalf("container walrelay has no port named metrics")
	}
	for _, pr := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s probe: none over HTTP", pr.what)
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path || (g.Port.String() != named && g.Port.String() != port) {
			t.Errorf("%s probe: GET %s on port %s; want %s on %s (%s)", pr.what, g.Path, g.Port.String(), pr.path, named, port)
		}
	}
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v; want prometheus.io/scrape true, port %s, path /metrics", ann, port)
	}
	checkMemoryLimit(t, c)
}

// memoryLimitBase is walrelay's soft memory limit without the window
// (internal/memlimit): 32 MiB.
const memoryLimitBase = 32 << 20

// checkMemoryLimit: GOMEMLIMIT covers the base and twice the in-flight
// window (README "Memory"), and stays below the container's memory limit.
func checkMemoryLimit(t *testing.T, c corev1.Container) {
	t.Helper()
	gomem, ok := envValue(c, "GOMEMLIMIT")
	if !ok {
		t.Fatalf("container %s sets no GOMEMLIMIT", c.Name)
	}
	soft, err := resource.ParseQuantity(strings.TrimSuffix(gomem, "B"))
	testkit.Must(t, err, "GOMEMLIMIT=%s", gomem)
	window := int64(16 << 20)
	if v, ok := envValue(c, "WALRELAY_MAX_IN_FLIGHT_BYTES"); ok {
		q, err := resource.ParseQuantity(v)
		testkit.Must(t, err, "WALRELAY_MAX_IN_FLIGHT_BYTES=%s", v)
		window = q.Value()
	}
	if want := memoryLimitBase + 2*window; soft.Value() < want {
		t.Errorf("GOMEMLIMIT=%s (%d bytes) is below 32 MiB plus twice the in-flight window of %d bytes (%d)", gomem, soft.Value(), window, want)
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if soft.Value() >= limit.Value() {
		t.Errorf("GOMEMLIMIT=%s is not below the container's memory limit %s", gomem, limit.String())
	}
	request := c.Resources.Requests[corev1.ResourceMemory]
	if request.Value() < soft.Value() {
		t.Errorf("memory request %s is below GOMEMLIMIT=%s, which walrelay grows to under load", request.String(), gomem)
	}
}

// The PodDisruptionBudget and the PodMonitor select the Deployment's pods,
// and not the init or prune Jobs' pods.
func TestKubernetesSelectorsMatchTheRelay(t *testing.T) {
	m := loadManifests(t)
	d := m.deployment(t)
	pods := labels.Set(d.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	testkit.Must(t, err, "Deployment selector")
	if !sel.Matches(pods) {
		t.Fatalf("the Deployment's selector %s does not match its pods %v", sel, pods)
	}
	var others []labels.Set
	for _, j := range m.jobs {
		others = append(others, j.Spec.Template.Labels)
	}
	for _, c := range m.cronJobs {
		others = append(others, c.Spec.JobTemplate.Spec.Template.Labels)
	}
	check := func(what string, ls *metav1.LabelSelector) {
		s, err := metav1.LabelSelectorAsSelector(ls)
		testkit.Must(t, err, "%s selector", what)
		if s.Empty() || !s.Matches(pods) {
			t.Errorf("%s selects %q; want the Deployment's pods %v", what, s, pods)
		}
		for _, o := range others {
			if s.Matches(o) {
				t.Errorf("%s selects %q, which matches a Job's pods %v too", what, s, o)
			}
		}
	}
	for _, p := range m.pdbs {
		check("PodDisruptionBudget "+p.Name, p.Spec.Selector)
		if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() < 1 || p.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
			t.Errorf("PodDisruptionBudget %s: minAvailable %v; want at least 1 and below the %d replicas", p.Name, p.Spec.MinAvailable, *d.Spec.Replicas)
		}
	}
	for _, pm := range m.podMonitors {
		check("PodMonitor "+pm.Name, &pm.Spec.Selector)
		for _, e := range pm.Spec.PodMetricsEndpoints {
			if e.Port == nil || *e.Port != "metrics" || e.Path != "/metrics" {
				t.Errorf("PodMonitor %s: endpoint port %v path %q; want metrics, /metrics", pm.Name, e.Port, e.Path)
			}
		}
	}
}

// secretOf returns the Secret a container's password file comes from.
func secretOf(t *testing.T, spec *corev1.PodSpec, c corev1.Container) string {
	t.Helper()
	file, _ := envValue(c, "WALRELAY_POSTGRES_PASSWORD_FILE")
	for _, vm := range c.VolumeMounts {
		if filepath.Dir(file) != vm.MountPath {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	t.Fatalf("container %s: no Secret holds its password file %q", c.Name, file)
	return ""
}

// The roles: run and init connect as walrelay's role, prune as the table
// owner's (another Secret, another URL); the DDL is applied as the owner.
func TestKubernetesRoles(t *testing.T) {
	m := loadManifests(t)
	d := m.deployment(t)
	relay := secretOf(t, &d.Spec.Template.Spec, mustContainer(t, &d.Spec.Template.Spec, "walrelay"))
	job := m.jobs[0]
	if got := secretOf(t, &job.Spec.Template.Spec, mustContainer(t, &job.Spec.Template.Spec, "init")); got != relay {
		t.Errorf("Job %s: walrelay init reads Secret %s; want walrelay's %s (the slot takes REPLICATION)", job.Name, got, relay)
	}
	prune := &m.cronJobs[0].Spec.JobTemplate.Spec.Template.Spec
	pc := mustContainer(t, prune, "prune")
	if got := secretOf(t, prune, pc); got == relay {
		t.Errorf("CronJob %s: prune reads walrelay's Secret %s; want the table owner's (walrelay's role has no DELETE)", m.cronJobs[0].Name, got)
	}
	urlKey := func(c corev1.Container, name string) string {
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				return e.ValueFrom.ConfigMapKeyRef.Key
			}
		}
		return ""
	}
	relayURL := urlKey(mustContainer(t, &d.Spec.Template.Spec, "walrelay"), "WALRELAY_POSTGRES_URL")
	if k := urlKey(pc, "WALRELAY_POSTGRES_URL"); k == "" || k == relayURL {
		t.Errorf("prune's WALRELAY_POSTGRES_URL comes from key %q; want the owner's URL, not walrelay's %q", k, relayURL)
	}
	if len(job.Spec.Template.Spec.InitContainers) != 1 || urlKey(job.Spec.Template.Spec.InitContainers[0], "OWNER_POSTGRES_URL") != k8sOwnerURLKey {
		t.Errorf("Job %s: want one init container applying outbox.sql with the owner's URL (%s)", job.Name, k8sOwnerURLKey)
	}
}

const k8sOwnerURLKey = "owner-postgres-url"

// The ConfigMap's URL connects as the role outbox.sql grants to (that the
// file is `walrelay schema --grant-to walrelay` of this version is
// cmd/walrelay's TestShippedDDLMatchesSchemaVerb).
func TestKubernetesConnectsAsTheGrantedRole(t *testing.T) {
	cm := loadManifests(t).configMaps["walrelay"]
	if cm == nil || !strings.HasPrefix(cm.Data["postgres-url"], "postgres://walrelay@") {
		t.Errorf("ConfigMap walrelay: postgres-url does not connect as walrelay, the role outbox.sql grants to")
	}
}

// The Kubernetes and operator modules are the tests' alone: the walrelay
// binary links none of them.
func TestKubernetesTypesAreTestOnly(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/walrelay")
	cmd.Dir = repo(t, ".")
	out, err := cmd.Output()
	testkit.Must(t, err, "go list -deps ./cmd/walrelay")
	for _, pkg := range strings.Fields(string(out)) {
		for _, prefix := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/prometheus-operator/"} {
			if strings.HasPrefix(pkg, prefix) {
				t.Errorf("walrelay links %s", pkg)
			}
		}
	}
}
