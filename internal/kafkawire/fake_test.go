package kafkawire

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/metadata"
)

// fakeBroker is a listener on loopback that speaks just enough of Kafka's
// protocol for these tests: it answers ApiVersions itself and hands every
// other request to answer, in the order each connection sent them. A nil
// answer leaves the request unanswered (a hung broker).
type fakeBroker struct {
	t      *testing.T
	ln     net.Listener
	answer func(req protocol.Message) protocol.Message

	mu    sync.Mutex
	asked map[protocol.ApiKey]int
	conns []net.Conn
	wg    sync.WaitGroup
}

func startFake(t *testing.T, answer func(req protocol.Message) protocol.Message) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	b := &fakeBroker{t: t, ln: ln, answer: answer, asked: make(map[protocol.ApiKey]int)}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

// count is how many requests of key the broker was sent.
func (b *fakeBroker) count(key protocol.ApiKey) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked[key]
}

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *fakeBroker) serve(c net.Conn) {
	defer b.wg.Done()
	r := bufio.NewReader(c)
	for {
		version, id, _, req, err := protocol.ReadRequest(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				b.t.Logf("fake broker: read request: %v", err)
			}
			return
		}
		b.mu.Lock()
		b.asked[req.ApiKey()]++
		b.mu.Unlock()
		var res protocol.Message
		if req.ApiKey() == protocol.ApiVersions {
			res = &apiversions.Response{ApiKeys: []apiversions.ApiKeyResponse{
				{ApiKey: int16(protocol.Metadata), MinVersion: 0, MaxVersion: 8},
				{ApiKey: int16(protocol.Produce), MinVersion: 3, MaxVersion: 8},
			}}
		} else if res = b.answer(req); res == nil {
			continue
		}
		if err := protocol.WriteResponse(c, version, id, res); err != nil {
			return
		}
	}
}

// dropConns closes every connection the broker accepted, as a broker
// that dies does.
func (b *fakeBroker) dropConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

func (b *fakeBroker) close() {
	b.ln.Close()
	b.dropConns()
	b.wg.Wait()
}

// layout is a metadata answer: brokers by id and, for topic, the leader of
// each partition.
func layout(brokers map[int32]string, topic string, leaders ...int32) *metadata.Response {
	res := &metadata.Response{}
	for id, a := range brokers {
		host, port, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(port)
		res.Brokers = append(res.Brokers, metadata.ResponseBroker{NodeID: id, Host: host, Port: int32(n)})
	}
	t := metadata.ResponseTopic{Name: topic}
	for i, l := range leaders {
		t.Partitions = append(t.Partitions, metadata.ResponsePartition{PartitionIndex: int32(i), LeaderID: l})
	}
	res.Topics = []metadata.ResponseTopic{t}
	return res
}
