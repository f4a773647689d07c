package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// batchCodecs are the values of --kafka-compression, each with the codec
// bits (0-2) of a record batch's attributes as Kafka's protocol guide
// numbers them: numbers of the protocol, not of walrelay's code, so that a
// relay that sends another codec, or none, fails the test.
var batchCodecs = []struct {
	name string
	bits uint8
}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}

// relayHeaders are the headers walrelay puts on every record of the
// stream (a row's own come from its headers column).
var relayHeaders = []string{
	schema.HeaderSpecVersion, schema.HeaderID, schema.HeaderType, schema.HeaderSource, schema.HeaderSubject,
	schema.HeaderTime, schema.HeaderContentType, schema.HeaderAggregateType, schema.HeaderAggregateVersion,
	schema.HeaderWALSource, schema.HeaderWALPosition,
}

// maxShown bounds the problems reported one by one per client.
const maxShown = 5

// Issue 48: the record batches walrelay encodes itself read back, record
// for record, in three clients that share no code with its encoder: kcat
// (librdkafka), franz-go and the Java consumer of the rig's Kafka
// (kafka-clients); and the batches Kafka stored carry the codec asked for.
// A missing client fails the test (-short skips it, as every e2e test).
//
// The codecs run one after the other, each with a fixture of its own: the
// JVMs and relays of five at once would crowd the rig's two cores for
// nothing (no timing is judged here).
func TestEveryCodecReadsBackInEveryClient(t *testing.T) {
	t.Parallel() // fixtures of its own: see the package doc
	java := newJavaReader(t)
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatalf("find kcat: got %v; want it on PATH (scripts/rig.sh start installs it)", err)
	}
	for _, c := range batchCodecs {
		t.Run(c.name, func(t *testing.T) {
			f := harness.New(t, "order", "customer")
			r := f.Start("--kafka-compression", c.name)
			// A few dozen rows over 16 aggregates, every other one with a
			// headers column (a traceparent), in transactions of 1 to 6.
			l := harness.Load{Writers: 2, Rows: 48, MaxTxRows: 6, AggregatesPerWriter: 8, Types: []string{"order", "customer"}}
			_, err := f.Write(context.Background(), l)
			testkit.Must(t, err, "write outbox rows")
			f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
			if code := r.Stop(); code != 0 {
				t.Fatalf("walrelay exit code after SIGTERM = %d; want 0", code)
			}
			rows := f.OutboxRows()
			harness.AssertClean(t, f.Verify(rows), 0) // kcat, every field and the order
			readBack(t, f, rows, java, c.bits)
		})
	}
}

// readBack reads the fixture's topics with each client and compares what
// each read with rows, and with what kcat read; franz-go also tells the
// codec of each record's batch, which must be bits.
func readBack(t *testing.T, f *harness.Fixture, rows []harness.Row, java *javaReader, bits uint8) {
	t.Helper()
	topics := []string{f.Topic("order"), f.Topic("customer")}
	var kcat []kafkatest.Record
	for _, topic := range topics {
		kcat = append(kcat, f.ReadTopic(topic)...)
	}
	franz, codecs := readFranz(t, f.Brokers, topics...)
	jrecs := java.read(t, f.Brokers, topics...)
	clients := []struct {
		name string
		recs []kafkatest.Record
	}{{"kcat", kcat}, {"franz-go", franz}, {"java", jrecs}}
	for _, c := range clients {
		harness.CheckCloudEvents(t, c.recs)
		report(t, c.name+" against the outbox rows", rowProblems(f, rows, c.recs))
		if c.name != "kcat" {
			report(t, c.name+" against kcat", differences(c.recs, kcat))
		}
	}
	if want := map[uint8]int{bits: len(rows)}; !maps.Equal(codecs, want) {
		t.Errorf("records by the codec of their batch (attribute bits 0-2) = %v; want %v", codecs, want)
	}
	t.Logf("%d rows; read back: kcat %d, franz-go %d, java %d records; records by batch codec: %v",
		len(rows), len(kcat), len(franz), len(jrecs), codecs)
}

// report fails t with the first problems, and counts the rest.
func report(t *testing.T, what string, problems []string) {
	t.Helper()
	for _, p := range problems[:min(maxShown, len(problems))] {
		t.Errorf("%s: %s", what, p)
	}
	if len(problems) > maxShown {
		t.Errorf("%s: %d more problems", what, len(problems)-maxShown)
	}
}

// rowProblems says how recs differ from rows: each row must be read once,
// in its topic, with its aggregate id as key, its payload as value, its
// message id as ce_id, walrelay's headers and those of its headers column.
func rowProblems(f *harness.Fixture, rows []harness.Row, recs []kafkatest.Record) []string {
	want := make(map[string]harness.Row, len(rows))
	for _, r := range rows {
		want[r.ID] = r
	}
	seen := map[string]bool{}
	var problems []string
	for _, rec := range recs {
		id := rec.Headers[schema.HeaderID]
		at := fmt.Sprintf("%s/%d@%d", rec.Topic, rec.Partition, rec.Offset)
		r, ok := want[id]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: ce_id %q; want a row's message id", at, id))
		case seen[id]:
			problems = append(problems, fmt.Sprintf("%s: ce_id %s again; want each row once", at, id))
		default:
			seen[id] = true
			if p := recordProblem(f, r, rec); p != "" {
				problems = append(problems, fmt.Sprintf("%s (%s): %s", at, id, p))
			}
		}
	}
	for _, r := range rows {
		if !seen[r.ID] {
			problems = append(problems, fmt.Sprintf("row %s: got no record; want one", r.ID))
		}
	}
	return problems
}

// recordProblem compares one record with its row; "" when they agree.
func recordProblem(f *harness.Fixture, r harness.Row, rec kafkatest.Record) string {
	var p []string
	if want := f.ExpectedTopic(r); rec.Topic != want {
		p = append(p, fmt.Sprintf("topic %q; want %q", rec.Topic, want))
	}
	if rec.Key == nil || *rec.Key != r.AggregateID {
		p = append(p, fmt.Sprintf("key %s; want %q", deref(rec.Key), r.AggregateID))
	}
	if rec.Payload == nil || *rec.Payload != r.Payload {
		p = append(p, fmt.Sprintf("value %s; want %q", deref(rec.Payload), r.Payload))
	}
	for _, k := range relayHeaders {
		if _, ok := rec.Headers[k]; !ok {
			p = append(p, "no header "+k)
		}
	}
	for k, v := range r.Headers {
		if s, ok := v.(string); ok && schema.CheckHeader(k, s) == "" && rec.Headers[k] != s {
			p = append(p, fmt.Sprintf("header %s = %q; want %q, the headers column's", k, rec.Headers[k], s))
		}
	}
	return strings.Join(p, "; ")
}

// differences says how got differs from what kcat read: the same records
// at the same places, with the same keys, values and headers.
func differences(got, kcat []kafkatest.Record) []string {
	type place struct {
		topic     string
		partition int32
		offset    int64
	}
	ref := make(map[place]kafkatest.Record, len(kcat))
	for _, r := range kcat {
		ref[place{r.Topic, r.Partition, r.Offset}] = r
	}
	var out []string
	if len(got) != len(kcat) {
		out = append(out, fmt.Sprintf("%d records; kcat read %d", len(got), len(kcat)))
	}
	for _, r := range got {
		k, ok := ref[place{r.Topic, r.Partition, r.Offset}]
		at := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
		switch {
		case !ok:
			out = append(out, at+": kcat read no record there")
		case deref(r.Key) != deref(k.Key) || deref(r.Payload) != deref(k.Payload):
			out = append(out, fmt.Sprintf("%s: key %s, value %s; kcat: key %s, value %s", at, deref(r.Key), deref(r.Payload), deref(k.Key), deref(k.Payload)))
		case !maps.Equal(r.Headers, k.Headers):
			out = append(out, fmt.Sprintf("%s: headers %v; kcat: %v", at, r.Headers, k.Headers))
		}
	}
	return out
}

// putHeader adds a header to rec; a name twice is an error (kcat's reader
// refuses it too).
func putHeader(rec *kafkatest.Record, key string, value []byte) error {
	if _, dup := rec.Headers[key]; dup {
		return fmt.Errorf("header %q twice at %s/%d@%d", key, rec.Topic, rec.Partition, rec.Offset)
	}
	rec.Headers[key] = string(value)
	return nil
}

// readFranz reads topics with franz-go, from their start to the end
// offsets they have now, and counts the records by the codec of the batch
// each came in (bits 0-2 of the batch's attributes, as fetched).
func readFranz(t *testing.T, brokers string, topics ...string) ([]kafkatest.Record, map[uint8]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kafkatest.EndOffsets(ctx, brokers, topics...)
	testkit.Must(t, err, "end offsets of %v", topics)
	from := map[string]map[int32]kgo.Offset{}
	left := map[kafkatest.Partition]int64{} // the end offsets not reached yet
	for p, end := range ends {
		if from[p.Topic] == nil {
			from[p.Topic] = map[int32]kgo.Offset{}
		}
		from[p.Topic][p.Partition] = kgo.NewOffset().AtStart()
		if end > 0 {
			left[p] = end
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumePartitions(from))
	testkit.Must(t, err, "start a franz-go client")
	defer cl.Close()
	var recs []kafkatest.Record
	codecs := map[uint8]int{}
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		for _, e := range fetches.Errors() {
			t.Fatalf("franz-go fetch of %s/%d: got %v; want records (end offsets not reached: %v)", e.Topic, e.Partition, e.Err, left)
		}
		for r := range fetches.RecordsAll() {
			rec := kafkatest.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: bytesOrNull(r.Key), Payload: bytesOrNull(r.Value), Headers: map[string]string{}}
			for _, h := range r.Headers {
				testkit.Must(t, putHeader(&rec, h.Key, h.Value), "franz-go record")
			}
			recs = append(recs, rec)
			codecs[r.Attrs.CompressionType()]++
			if p := (kafkatest.Partition{Topic: r.Topic, Partition: r.Partition}); r.Offset+1 >= left[p] {
				delete(left, p)
			}
		}
	}
	return recs, codecs
}

// bytesOrNull is b as a string, nil for null.
func bytesOrNull(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// javaReader runs readbackJava, a consumer of Kafka's Java client
// (kafka-clients, among the rig's jars), with the JVM's source launcher:
// the rig's jars hold no console consumer (it is in kafka-tools, which the
// broker does not depend on), and a consumer of its own prints bytes
// exactly, where the console consumer's formatter prints them as text.
type javaReader struct {
	java, libs, src, logs string
	jvm                   []string
}

// newJavaReader finds Java and the rig's jars, or fails the test.
func newJavaReader(t *testing.T) *javaReader {
	t.Helper()
	testkit.Services(t) // the same -short and missing-rig rules as every e2e test
	libs := rig.Env(t, "WALRELAY_TEST_KAFKA_LIBS")
	if jars, _ := filepath.Glob(filepath.Join(libs, "kafka-clients-*.jar")); len(jars) == 0 {
		t.Fatalf("WALRELAY_TEST_KAFKA_LIBS=%s holds no kafka-clients-*.jar: run `scripts/kafka.sh start`, which fetches them", libs)
	}
	java, major := kafkaRuntime(t, libs)
	dir := t.TempDir()
	j := &javaReader{java: java, libs: libs, src: filepath.Join(dir, "Readback.java"), logs: filepath.Join(dir, "logs")}
	j.jvm = jvmOptions(j.logs, major) // the client's own log goes to a file there
	testkit.Must(t, os.WriteFile(j.src, []byte(readbackJava), 0o600), "write %s", j.src)
	return j
}

// read reads topics from their start to the end offsets they have when
// the consumer starts; one JVM for all of them.
func (j *javaReader) read(t *testing.T, brokers string, topics ...string) []kafkatest.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := slices.Concat(j.jvm, []string{"-cp", filepath.Join(j.libs, "*"), j.src, brokers, "60000"}, topics)
	cmd := exec.CommandContext(ctx, j.java, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Java consumer of %v: got %v; want the records\n%s\nits log (last lines):\n%s",
			topics, err, stderr.String(), tailFile(filepath.Join(j.logs, "server.log"), secureKafkaLogEnd))
	}
	recs, err := parseReadback(out)
	testkit.Must(t, err, "parse the Java consumer's output")
	t.Logf("the Java consumer read %d records in %s, its compile and JVM start included", len(recs), time.Since(start).Round(time.Millisecond))
	return recs
}

// parseReadback reads readbackJava's output, one record a line.
func parseReadback(out []byte) ([]kafkatest.Record, error) {
	var recs []kafkatest.Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		rec, err := parseReadbackLine(sc.Text())
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}

// parseReadbackLine reads "record", topic, partition, offset, key, value
// and each header's key and value, tab-separated, the bytes in base64, a
// null as "-".
func parseReadbackLine(line string) (kafkatest.Record, error) {
	f := strings.Split(line, "\t")
	if len(f) < 6 || len(f)%2 != 0 || f[0] != "record" {
		return kafkatest.Record{}, fmt.Errorf("line %q: want record, topic, partition, offset, key, value and header pairs", line)
	}
	partition, err1 := strconv.ParseInt(f[2], 10, 32)
	offset, err2 := strconv.ParseInt(f[3], 10, 64)
	key, err3 := unbase64(f[4])
	value, err4 := unbase64(f[5])
	rec := kafkatest.Record{Topic: f[1], Partition: int32(partition), Offset: offset, Key: bytesOrNull(key), Payload: bytesOrNull(value), Headers: map[string]string{}}
	err := errors.Join(err1, err2, err3, err4)
	for i := 6; i < len(f) && err == nil; i += 2 {
		k, errK := unbase64(f[i])
		v, errV := unbase64(f[i+1])
		if err = errors.Join(errK, errV); err == nil {
			err = putHeader(&rec, string(k), v)
		}
	}
	if err != nil {
		return kafkatest.Record{}, fmt.Errorf("line %q: %w", line, err)
	}
	return rec, nil
}

// unbase64 is s decoded from base64, nil for "-" (null).
func unbase64(s string) ([]byte, error) {
	if s == "-" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(s)
}

// readbackJava prints every record of the topics named (args: bootstrap
// servers, a timeout in ms, the topics), read from their start to the end
// offsets they have when it starts, in parseReadbackLine's format. It
// assigns the partitions itself: no group, nothing committed.
const readbackJava = `import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Readback {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("enable.auto.commit", "false");
        long deadline = System.currentTimeMillis() + Long.parseLong(args[1]);
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 2; i < args.length; i++) {
                for (PartitionInfo p : c.partitionsFor(args[i])) {
                    tps.add(new TopicPartition(p.topic(), p.partition()));
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            while (!reached(c, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("end offsets " + end + " not reached in time");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.append("record\t").append(r.topic()).append('\t').append(r.partition()).append('\t').append(r.offset())
                        .append('\t').append(b64(r.key())).append('\t').append(b64(r.value()));
                    for (Header h : r.headers()) {
                        out.append('\t').append(b64(h.key().getBytes(StandardCharsets.UTF_8))).append('\t').append(b64(h.value()));
                    }
                    out.append('\n');
                }
            }
        }
        System.out.print(out);
        System.out.flush();
    }

    static boolean reached(KafkaConsumer<?, ?> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    static String b64(byte[] b) {
        return b == null ? "-" : Base64.getEncoder().encodeToString(b);
    }
}
`
