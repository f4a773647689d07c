package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// kafkaRig returns the rig's ordinary brokers, its PROXIED listener and the
// address that listener is advertised at. Without them the test fails,
// except under -short, so that CI cannot pass by skipping.
func kafkaRig(t *testing.T) (brokers []string, proxied, proxy string) {
	t.Helper()
	b := rig.KafkaBrokers(t)
	return strings.Split(b, ","), rig.Env(t, "WALRELAY_TEST_KAFKA_PROXIED"), rig.Env(t, "WALRELAY_TEST_KAFKA_PROXY")
}

// createTopic makes a fresh one-partition topic through the ordinary
// listener and deletes it when the test ends.
func createTopic(t *testing.T, brokers []string) string {
	t.Helper()
	topic := rig.Unique("walrelay-faultproxy-")
	kafkatest.CreateTopic(t, strings.Join(brokers, ","), topic, 1)
	return topic
}

// proxiedClient is a kafka-go client bootstrapped at the proxy, with its own
// transport so that no pooled connection bypasses the proxy.
func proxiedClient(t *testing.T, proxy string) *kafka.Client {
	t.Helper()
	transport := &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		DialTimeout: 2 * time.Second,
		ClientID:    "walrelay-faultproxy-test",
	}
	t.Cleanup(transport.CloseIdleConnections)
	return &kafka.Client{Addr: kafka.TCP(proxy), Timeout: 5 * time.Second, Transport: transport}
}

func produce(client *kafka.Client, topic, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := client.Produce(ctx, &kafka.ProduceRequest{
		Topic:        topic,
		RequiredAcks: kafka.RequireAll,
		Records:      kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte(value))}),
	})
	if err != nil {
		return err
	}
	return res.Error
}

// produceEventually retries until a produce succeeds or 20s have passed,
// and reports how many attempts failed first.
func produceEventually(t *testing.T, client *kafka.Client, topic, value string) int {
	t.Helper()
	failed := 0
	poll.EventuallyEvery(t, 20*time.Second, 100*time.Millisecond, fmt.Sprintf("%q produced through the proxy", value), func() (string, bool) {
		err := produce(client, topic, value)
		if err == nil {
			return "", true
		}
		failed++
		return fmt.Sprintf("%v (after %d attempts)", err, failed), false
	})
	return failed
}

// fetchAll reads the values of partition 0 of topic from offset 0. The
// client may still hold a pooled connection that a Cut reset: the first
// requests on it fail, so a fetch is retried like a produce.
func fetchAll(t *testing.T, client *kafka.Client, topic string) []string {
	t.Helper()
	var res *kafka.FetchResponse
	poll.EventuallyEvery(t, 20*time.Second, 100*time.Millisecond, "a fetch of "+topic+" through the proxy", func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		res, err = client.Fetch(ctx, &kafka.FetchRequest{
			Topic: topic, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 500 * time.Millisecond,
		})
		if err == nil {
			err = res.Error
		}
		return fmt.Sprint(err), err == nil
	})
	var values []string
	for {
		r, err := res.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return values
		}
		if err != nil {
			t.Fatalf("read record: %v", err)
		}
		v, err := io.ReadAll(r.Value)
		if err != nil {
			t.Fatalf("read record value: %v", err)
		}
		values = append(values, string(v))
	}
}

// TestKafkaThroughProxy checks the rig's PROXIED listener with a real
// broker: metadata fetched through the proxy names the proxy, so every
// connection of the client goes through it; Cut makes a produce fail and
// Restore lets the same client produce again.
func TestKafkaThroughProxy(t *testing.T) {
	brokers, proxied, proxyAddr := kafkaRig(t)
	p, err := Start(proxyAddr, proxied)
	if err != nil {
		t.Fatalf("start the proxy on the advertised address: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		checkNoGoroutines(t)
	})
	topic := createTopic(t, brokers)
	client := proxiedClient(t, proxyAddr)

	checkAdvertised(t, client, proxyAddr)
	if n := produceEventually(t, client, topic, "before"); n > 0 {
		t.Logf("first produce succeeded after %d failed attempts (new topic)", n)
	}
	if p.Conns() == 0 {
		t.Fatal("Conns() = 0 after producing through the proxy; want at least 1")
	}

	p.Cut()
	if err := produce(client, topic, "during cut"); err == nil {
		t.Fatal("produce during Cut succeeded; want an error")
	} else {
		t.Logf("produce during Cut: %v", err)
	}

	p.Restore()
	if n := produceEventually(t, client, topic, "after"); n > 0 {
		t.Logf("produce after Restore succeeded after %d failed attempts", n)
	}
	got := fetchAll(t, client, topic)
	if strings.Join(got, ",") != "before,after" {
		t.Fatalf("records in %s: got %q; want [before after]", topic, got)
	}
}

// checkAdvertised fails unless every broker in the metadata answered
// through the proxy is the proxy itself.
func checkAdvertised(t *testing.T, client *kafka.Client, proxyAddr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatalf("metadata through the proxy: %v", err)
	}
	if len(res.Brokers) == 0 {
		t.Fatal("metadata through the proxy lists no broker")
	}
	for _, b := range res.Brokers {
		if got := net.JoinHostPort(b.Host, strconv.Itoa(b.Port)); got != proxyAddr {
			t.Fatalf("broker %d advertised at %s; want %s (does the broker run the PROXIED listener? scripts/kafka.sh stop && scripts/kafka.sh start)", b.ID, got, proxyAddr)
		}
	}
}
