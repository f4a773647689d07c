//go:build bench

package drain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// brokerJIT is the CPU time the broker's JIT compiler threads (HotSpot's
// "C1 CompilerThread…" and "C2 CompilerThread…") have spent. A young broker
// spends most of its CPU there, not on the records: in a 200k x 1 x 200 B
// kafka run right after the rig started, 1.6 of the broker's 3.0 s were
// compilation, and it took several runs to fall off. That is what made the
// broker's CPU in a full run twice its CPU in a run alone (issue 20).
// Compiler threads come and go with the JVM's load; the time of one that
// has exited is not counted.
func brokerJIT(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	var sum time.Duration
	for _, task := range tasks {
		comm, err := os.ReadFile(task + "/comm")
		if err != nil || !bytes.Contains(comm, []byte("CompilerThre")) {
			continue
		}
		if cpu, ok := benchenv.StatCPU(task + "/stat"); ok {
			sum += cpu
		}
	}
	return sum
}

// warmBroker produces to a scratch topic, through kafka-go's Client as the
// sink does (one batch in flight per partition, acks=all, the benchmark's
// payload sizes), until a round costs the broker's JIT compiler less than
// a tenth of what the broker spends on the round itself, three rounds in a
// row, so that the first cell does not pay for the compilation the later
// ones are spared. It logs each round. It cannot stop the JIT for good: a
// path the drain takes and the warm-up does not is compiled in a cell, which
// is why every kafka run reports the JIT's share.
func warmBroker(t *testing.T, brokers string) {
	t.Helper()
	if kafkaPid == 0 {
		t.Log("broker warm-up skipped: the broker's pid is unknown")
		return
	}
	topic := fmt.Sprintf("drain_warmup_%d", time.Now().UnixNano())
	kafkatest.CreateTopic(t, brokers, topic, partitions)
	client := kafkatest.Client(brokers)
	const (
		maxRounds  = 60
		batches    = 100 // per partition and round
		perBatch   = 200
		batchBytes = 512 << 10
		roundCalm  = 10 // the JIT's share under which a round counts as calm, in percent
		calmRounds = 3  // in a row: compiling comes in bursts
		maxWarmFor = 3 * time.Minute
	)
	began := time.Now()
	var shares []string
	calm := 0
	for round := range maxRounds {
		cpu0, _ := benchenv.ProcCPU(kafkaPid)
		jit0 := brokerJIT(kafkaPid)
		var wg sync.WaitGroup
		errs := make(chan error, partitions)
		for p := range partitions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range batches {
					size := payloadSizes[(b+round)%len(payloadSizes)]
					records := make([]kafka.Record, min(perBatch, batchBytes/size)) // the sink's default bound
					for i := range records {
						records[i] = kafka.Record{Key: kafka.NewBytes([]byte(fmt.Sprint(i))), Value: kafka.NewBytes(bytes.Repeat([]byte{'x'}, size))}
					}
					if err := produce(client, topic, p, records); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		testkit.Must(t, <-errs, "warm the broker up")
		cpu1, _ := benchenv.ProcCPU(kafkaPid)
		jit := brokerJIT(kafkaPid) - jit0
		share := 100 * float64(jit) / float64(max(cpu1-cpu0, time.Millisecond))
		shares = append(shares, fmt.Sprintf("%.0f%%", share))
		if calm++; share >= roundCalm {
			calm = 0
		}
		if calm == calmRounds || time.Since(began) > maxWarmFor {
			break
		}
	}
	testkit.Must(t, kafkatest.DeleteTopics(brokers, topic), "delete the warm-up topic")
	t.Logf("broker warm-up: %d round(s) of %d batches in %s; the JIT compiler's share of the broker's CPU per round: %s",
		len(shares), partitions*batches, time.Since(began).Round(time.Millisecond), strings.Join(shares, ", "))
}

// produce sends one batch, retrying while the new topic's partition has no
// leader yet.
func produce(client *kafka.Client, topic string, partition int, records []kafka.Record) error {
	for attempt := 0; ; attempt++ {
		res, err := client.Produce(context.Background(), &kafka.ProduceRequest{
			Topic: topic, Partition: partition, RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(records...),
		})
		if err == nil {
			err = res.Error
		}
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || !kerr.Temporary() || attempt == 100 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle brings the machine to the same state before each backlog's runs:
// the page cache's dirty pages written out (sync: the load's WAL and heap,
// the previous shape's Kafka logs, gigabytes at 16 KB, which the kernel
// would otherwise write back during the runs) and the broker idle (the
// previous shape's topics are deleted when it ends, and their files a
// second later: file.delete.delay.ms in scripts/kafka/server.properties).
// In a full run before this, the deletion of a 16 KB shape's 3 GB topic
// landed in the next shape's kafka runs and doubled the broker's CPU there.
func settle(t *testing.T) {
	t.Helper()
	began := time.Now()
	syscall.Sync()
	synced := time.Since(began)
	const (
		sample  = 500 * time.Millisecond
		idle    = sample / 10 // of the broker's CPU: a tenth of a core
		atMost  = 30 * time.Second
		atLeast = 1500 * time.Millisecond // the deletion's delay, and some
	)
	for time.Since(began) < atMost {
		before, ok := benchenv.ProcCPU(kafkaPid)
		time.Sleep(sample)
		after, ok2 := benchenv.ProcCPU(kafkaPid)
		if !ok || !ok2 || after-before < idle && time.Since(began) >= atLeast {
			break
		}
	}
	t.Logf("settled in %s (sync %s)", time.Since(began).Round(time.Millisecond), synced.Round(time.Millisecond))
}
