package e2e

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// The users of the secured broker. SCRAM keeps one password per mechanism,
// so the three differ: a password only works with its own mechanism.
const (
	kafkaUser = "walrelay"
	// readlessUser may write the topics of the test that grants it so, not
	// read them (testReadlessPrincipal); its SCRAM-SHA-512 password.
	readlessUser      = "readless"
	readlessPassword  = "readless-Pa55word-e2e"
	plainPassword     = "plain-Pa55word-e2e"
	scram256Password  = "scram256-Pa55word-e2e"
	scram512Password  = "scram512-Pa55word-e2e"
	secureKafkaWait   = 90 * time.Second
	secureKafkaHeap   = "384m"
	secureKafkaLogEnd = 40 // lines of the broker's log shown when it fails
)

// secureKafka is a single-node KRaft broker of the test's own, run from
// the rig's Kafka jars (WALRELAY_TEST_KAFKA_LIBS), with a listener per way
// of securing Kafka, all on loopback and advertised as they are bound.
// Its certificate, from ca, is for 127.0.0.1 and localhost.
type secureKafka struct {
	plain     string // PLAINTEXT: inter-broker, and the fixtures' topics and verifier
	saslSSL   string // SASL_SSL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over TLS
	saslPlain string // SASL_PLAINTEXT: the same users without TLS
	mTLS      string // SSL that requires a client certificate from ca
	ca        *testkit.CA
}

// startSecureKafka starts the broker and stops it in t.Cleanup. Without
// WALRELAY_TEST_KAFKA_LIBS it fails the test, as every e2e test fails
// without the rig.
func startSecureKafka(t *testing.T) *secureKafka {
	t.Helper()
	testkit.Services(t) // the same -short and missing-rig rules as every e2e test
	libs := os.Getenv("WALRELAY_TEST_KAFKA_LIBS")
	if libs == "" {
		// Like the rig's other variables: missing is a failure, never a
		// skip (only -short skips, in testkit.Services).
		t.Fatal("WALRELAY_TEST_KAFKA_LIBS is not set: the TLS and SASL tests run a Kafka broker of their own from the rig's jars; " +
			"run `make test`, or `eval \"$(scripts/rig.sh env)\"` after `scripts/rig.sh start`")
	}
	java, major := kafkaRuntime(t, libs)
	dir := t.TempDir()
	k := &secureKafka{plain: testkit.FreePort(t), saslSSL: testkit.FreePort(t), saslPlain: testkit.FreePort(t),
		mTLS: testkit.FreePort(t), ca: testkit.NewCA(t)}
	controller := testkit.FreePort(t)
	keystore := k.keystore(t, dir)
	props := filepath.Join(dir, "server.properties")
	testkit.Must(t, os.WriteFile(props, []byte(k.properties(controller, filepath.Join(dir, "data"), keystore)), 0o600), "write %s", props)
	jvm := jvmOptions(filepath.Join(dir, "logs"), major)

	start := time.Now()
	format := exec.Command(java, append(jvm, "-cp", filepath.Join(libs, "*"), "kafka.tools.StorageTool", "format",
		"-t", clusterID(t), "-c", props, "--standalone",
		"--add-scram", "SCRAM-SHA-256=[name="+kafkaUser+",password="+scram256Password+"]",
		"--add-scram", "SCRAM-SHA-512=[name="+kafkaUser+",password="+scram512Password+"]",
		"--add-scram", "SCRAM-SHA-512=[name="+readlessUser+",password="+readlessPassword+"]")...)
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("format the secured broker's storage: %v\n%s", err, out)
	}
	out, err := os.Create(filepath.Join(dir, "kafka.out"))
	testkit.Must(t, err, "create kafka.out")
	broker := exec.Command(java, append(jvm, "-cp", filepath.Join(libs, "*"), "kafka.Kafka", props)...)
	broker.Stdout, broker.Stderr = out, out
	// The broker dies with the test binary, even one killed by a timeout.
	broker.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	testkit.Must(t, broker.Start(), "start the secured broker")
	exited := make(chan struct{})
	go func() {
		broker.Wait() //nolint:errcheck // the exit is seen through exited
		out.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		broker.Process.Kill() //nolint:errcheck // may have exited already
		<-exited
		if t.Failed() {
			t.Logf("secured broker's log (last lines):\n%s", tailFile(filepath.Join(dir, "logs", "server.log"), secureKafkaLogEnd))
		}
	})
	k.waitReady(t, exited, dir)
	t.Logf("secured Kafka broker (Kafka %d.x, storage formatted and started in %s): plain %s, SASL_SSL %s, SASL_PLAINTEXT %s, mTLS %s",
		major, time.Since(start).Round(time.Millisecond), k.plain, k.saslSSL, k.saslPlain, k.mTLS)
	return k
}

// kafkaRuntime finds Java (JAVA_HOME, else PATH) and the major version of
// the Kafka jars in libs.
func kafkaRuntime(t *testing.T, libs string) (java string, major int) {
	t.Helper()
	jars, _ := filepath.Glob(filepath.Join(libs, "kafka_2.13-*.jar"))
	if len(jars) == 0 {
		t.Fatalf("WALRELAY_TEST_KAFKA_LIBS=%s holds no kafka_2.13-*.jar: run `scripts/kafka.sh start`, which fetches them", libs)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka_2.13-"), ".jar")
	if _, err := fmt.Sscanf(version, "%d.", &major); err != nil {
		t.Fatalf("version of %s: %v", jars[0], err)
	}
	java = filepath.Join(os.Getenv("JAVA_HOME"), "bin", "java")
	if os.Getenv("JAVA_HOME") == "" {
		var err error
		java, err = exec.LookPath("java")
		testkit.Must(t, err, "find java (the rig's Kafka runs on it; set JAVA_HOME or PATH)")
	}
	return java, major
}

// jvmOptions are the broker's: a small heap, a quick start, logs in dir.
func jvmOptions(logs string, major int) []string {
	o := []string{"-Xms64m", "-Xmx" + secureKafkaHeap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true", "-Dkafka.logs.dir=" + logs}
	conf := filepath.Join(rig.RepoRoot(), "scripts", "kafka")
	if major >= 4 {
		return append(o, "-Dlog4j2.configurationFile="+filepath.Join(conf, "log4j2.xml"))
	}
	return append(o, "-Dlog4j.configuration=file:"+filepath.Join(conf, "log4j.properties"))
}

// keystore writes Kafka's PEM key store: the unencrypted PKCS#8 key, then
// the certificate chain.
func (k *secureKafka) keystore(t *testing.T, dir string) string {
	t.Helper()
	certFile, keyFile := k.ca.Issue(t, "localhost", "127.0.0.1", "localhost")
	var pem bytes.Buffer
	for _, f := range []string{keyFile, certFile, k.ca.File()} {
		b, err := os.ReadFile(f)
		testkit.Must(t, err, "read %s", f)
		pem.Write(b)
	}
	path := filepath.Join(dir, "server.keystore.pem")
	testkit.Must(t, os.WriteFile(path, pem.Bytes(), 0o600), "write %s", path)
	return path
}

func (k *secureKafka) properties(controller, data, keystore string) string {
	listeners := fmt.Sprintf("PLAINTEXT://%s,SASL_SSL://%s,SASL_PLAINTEXT://%s,SSL://%s", k.plain, k.saslSSL, k.saslPlain, k.mTLS)
	lines := []string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.bootstrap.servers=" + controller,
		"listeners=" + listeners + ",CONTROLLER://" + controller,
		"advertised.listeners=" + listeners,
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name=PLAINTEXT",
		"controller.listener.names=CONTROLLER",
		"log.dirs=" + data,
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + keystore,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + k.ca.File(),
		"listener.name.ssl.ssl.client.auth=required",
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"default.replication.factor=1",
		"min.insync.replicas=1",
		"auto.create.topics.enable=true",
		// An authorizer, open where no ACL names a topic: the plain and
		// controller listeners (ANONYMOUS) may do anything, and only the
		// topics a test grants readlessUser are closed to everyone else.
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"allow.everyone.if.no.acl.found=true",
		"super.users=User:ANONYMOUS",
		"num.partitions=1",
		"num.network.threads=1",
		"num.io.threads=2",
		"num.recovery.threads.per.data.dir=1",
		"group.initial.rebalance.delay.ms=0",
		// SCRAM-SHA-256 sessions on SASL_PLAINTEXT last 2s: kafka-go does not
		// re-authenticate, so the broker closes its connection on the first
		// request after that, and the next connection authenticates anew (a
		// changed password then shows at once).
		"listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms=2000",
	}
	for _, l := range []string{"sasl_ssl", "sasl_plaintext"} {
		lines = append(lines,
			"listener.name."+l+".plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_"+kafkaUser+"=\""+plainPassword+"\";",
			"listener.name."+l+".scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
			"listener.name."+l+".scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;")
	}
	return strings.Join(lines, "\n") + "\n"
}

// clusterID is a fresh id as Kafka makes them: 16 random bytes in URL-safe
// base64 without padding, not starting with '-'.
func clusterID(t *testing.T) string {
	t.Helper()
	for {
		var b [16]byte
		_, err := rand.Read(b[:])
		testkit.Must(t, err, "random cluster id")
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// waitReady waits until the broker answers metadata on its plain listener
// with itself registered, and every other listener accepts connections.
func (k *secureKafka) waitReady(t *testing.T, exited <-chan struct{}, dir string) {
	t.Helper()
	poll.EventuallyEvery(t, secureKafkaWait, 250*time.Millisecond, "the secured broker answering on "+k.plain, func() (string, bool) {
		if k.answers() {
			return "", true
		}
		select {
		case <-exited:
			t.Fatalf("the secured broker exited during start-up:\n%s\n%s", tailFile(filepath.Join(dir, "kafka.out"), secureKafkaLogEnd),
				tailFile(filepath.Join(dir, "logs", "server.log"), secureKafkaLogEnd))
		default:
		}
		return "no answer", false
	})
	for _, addr := range []string{k.saslSSL, k.saslPlain, k.mTLS} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		testkit.Must(t, err, "connect to the secured broker's listener %s", addr)
		c.Close()
	}
}

// answers asks for metadata with a transport of its own: kafka-go's
// default transport would keep answering from a cached failure.
func (k *secureKafka) answers() bool {
	tr := &kafka.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	md, err := (&kafka.Client{Addr: kafka.TCP(k.plain), Transport: tr}).Metadata(ctx, &kafka.MetadataRequest{})
	return err == nil && len(md.Brokers) > 0
}

// setSCRAM256 sets user's SCRAM-SHA-256 password, through the plain
// listener (a super user's). Like Kafka's tools, it sends the
// salted password, never the password.
func (k *secureKafka) setSCRAM256(t *testing.T, user, password string) {
	t.Helper()
	salt := make([]byte, 16)
	_, err := rand.Read(salt)
	testkit.Must(t, err, "salt")
	const iterations = 4096
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	testkit.Must(t, err, "salt the password")
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := (&kafka.Client{Addr: kafka.TCP(k.plain), Transport: tr}).AlterUserScramCredentials(ctx, &kafka.AlterUserScramCredentialsRequest{
		Upsertions: []kafka.UserScramCredentialsUpsertion{{Name: user, Mechanism: kafka.ScramMechanismSha256, Iterations: iterations, Salt: salt, SaltedPassword: salted}},
	})
	if err == nil && len(res.Results) == 1 {
		err = res.Results[0].Error
	}
	testkit.Must(t, err, "set the SCRAM-SHA-256 password of %s", user)
}

// tailFile is the last n lines of a file, or why it cannot be read.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// allow lets principal (User:name) do ops on the topics named with prefix,
// through the plain listener; the topics are then closed to every other
// principal but the super user.
func (k *secureKafka) allow(t *testing.T, principal, prefix string, ops ...kafka.ACLOperationType) {
	t.Helper()
	var acls []kafka.ACLEntry
	for _, op := range ops {
		acls = append(acls, kafka.ACLEntry{ResourceType: kafka.ResourceTypeTopic, ResourceName: prefix, ResourcePatternType: kafka.PatternTypePrefixed,
			Principal: principal, Host: "*", Operation: op, PermissionType: kafka.ACLPermissionTypeAllow})
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := (&kafka.Client{Addr: kafka.TCP(k.plain), Transport: tr}).CreateACLs(ctx, &kafka.CreateACLsRequest{ACLs: acls})
	if err == nil {
		err = errors.Join(res.Errors...)
	}
	testkit.Must(t, err, "allow %s %v on %s*", principal, ops, prefix)
}
