package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/metadata"
)

// idleClose is how long a connection may sit unused before it is closed
// and a fresh one opened on next use: below the broker's
// connections.max.idle.ms (10 minutes by default), so that walrelay, not
// the broker, ends an idle connection, and no request is written into one
// the broker is closing.
const idleClose = 5 * time.Minute

// NoLeader is a partition that has no leader in the layout last read
// (being elected, or its leader's broker unknown).
var ErrNoLeader = errors.New("the partition has no leader")

// Cluster is the layout of one Kafka cluster (its brokers and the leader of
// each partition of the topics asked about) and a connection per broker.
// The layout is read when a topic is first asked about and when Refresh is
// called, never on a timer: a producer calls Refresh when a broker says it
// does not lead a partition or its connection fails.
type Cluster struct {
	cfg Config

	mu      sync.Mutex
	brokers map[int32]string     // advertised address by node id
	leaders map[string][]leader  // by topic, indexed by partition
	topics  map[string]time.Time // every topic asked about, and since when
	conns   map[string]*Conn     // by address
	dials   map[string]*dial     // connections being opened
	reading *reading             // the layout read in progress, if any
	lastAt  time.Time            // when the last successful read started
	closed  bool
}

// leader is who leads a partition: a node id, -1 for none, and the error
// the broker gave for the partition.
type leader struct {
	id  int32
	err error
}

// dial is a connection being opened, shared by whoever asks meanwhile.
type dial struct {
	done chan struct{}
	conn *Conn
	err  error
	// abandoned: the dial ended because its caller's context did, which
	// says nothing of the broker; whoever waited dials again.
	abandoned bool
}

// reading is a layout read in progress, shared by whoever asks meanwhile.
type reading struct {
	started time.Time
	done    chan struct{}
	err     error
	// abandoned: the read ended because its caller's context did; whoever
	// waited reads again.
	abandoned bool
}

// New returns a Cluster for cfg. It connects to nothing until asked.
func New(cfg Config) (*Cluster, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafkawire: no bootstrap brokers")
	}
	return &Cluster{
		cfg:     cfg.withDefaults(),
		brokers: make(map[int32]string),
		leaders: make(map[string][]leader),
		topics:  make(map[string]time.Time),
		conns:   make(map[string]*Conn),
		dials:   make(map[string]*dial),
	}, nil
}

// Leader is the node id of the broker that leads topic's partition in the
// layout last read. A topic not asked about before is read first. The
// error is the broker's for the topic or partition
// (kafka.UnknownTopicOrPartition, kafka.LeaderNotAvailable), ErrNoLeader,
// or the read's.
func (c *Cluster) Leader(ctx context.Context, topic string, partition int) (int32, error) {
	c.mu.Lock()
	added, known := c.topics[topic]
	if !known {
		added = time.Now()
		c.topics[topic] = added
	}
	stale := c.lastAt.Before(added)
	c.mu.Unlock()
	if stale {
		if err := c.Refresh(ctx, added); err != nil {
			return -1, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, ok := c.leaders[topic]
	switch {
	case !ok:
		return -1, fmt.Errorf("topic %q: %w", topic, kafka.UnknownTopicOrPartition)
	case partition < 0 || partition >= len(ps):
		return -1, fmt.Errorf("topic %q partition %d: %w", topic, partition, kafka.UnknownTopicOrPartition)
	case ps[partition].err != nil:
		return -1, fmt.Errorf("topic %q partition %d: %w", topic, partition, ps[partition].err)
	case ps[partition].id < 0 || c.brokers[ps[partition].id] == "":
		return -1, fmt.Errorf("topic %q partition %d: %w", topic, partition, ErrNoLeader)
	}
	return ps[partition].id, nil
}

// Refresh makes sure the layout was read after since: when a read that
// started at or after since has ended, it returns at once; when one is
// under way, it waits for it; else it reads the layout itself, from the
// first broker that answers. Concurrent callers share one read, so a
// hundred partitions that failed together cost the cluster one metadata
// request.
func (c *Cluster) Refresh(ctx context.Context, since time.Time) error {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return net.ErrClosed
		}
		if !c.lastAt.IsZero() && !c.lastAt.Before(since) {
			c.mu.Unlock()
			return nil
		}
		r := c.reading
		if r == nil {
			r = &reading{started: time.Now(), done: make(chan struct{})}
			c.reading = r
			c.mu.Unlock()
			c.read(ctx, r)
		} else {
			c.mu.Unlock()
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		// A read that began before since is not fresh enough, and one
		// that ended with its reader's context is no answer: read again.
		if r.err != nil && !r.started.Before(since) && !r.abandoned {
			return r.err
		}
	}
}

// read reads the layout for r with ctx, bounded by twice the dial timeout,
// and publishes it.
func (c *Cluster) read(outer context.Context, r *reading) {
	ctx, cancel := context.WithTimeout(outer, 2*c.cfg.DialTimeout)
	defer cancel()
	res, err := c.askMetadata(ctx)
	abandoned := err != nil && outer.Err() != nil
	c.mu.Lock()
	if err == nil {
		c.apply(res)
		c.lastAt = r.started
	}
	r.err, r.abandoned = err, abandoned
	c.reading = nil
	c.mu.Unlock()
	close(r.done)
}

// askMetadata asks for the topics asked about so far: first over an open
// connection, then of the brokers known, then of the bootstrap addresses,
// each list in random order, until one answers.
func (c *Cluster) askMetadata(ctx context.Context) (*metadata.Response, error) {
	c.mu.Lock()
	req := &metadata.Request{TopicNames: make([]string, 0, len(c.topics))}
	for t := range c.topics {
		req.TopicNames = append(req.TopicNames, t)
	}
	var open []*Conn
	for _, conn := range c.conns {
		if conn.Alive(idleClose) {
			open = append(open, conn)
		}
	}
	var addrs []string
	for _, a := range c.brokers {
		addrs = append(addrs, a)
	}
	c.mu.Unlock()
	shuffle(open)
	shuffle(addrs)
	boot := append([]string(nil), c.cfg.Brokers...)
	shuffle(boot)
	var errs []error
	tried := make(map[string]bool)
	for _, conn := range open {
		tried[conn.addr] = true
		res, err := conn.Do(ctx, req)
		if err == nil {
			return res.(*metadata.Response), nil
		}
		errs = append(errs, err)
	}
	for _, a := range append(addrs, boot...) {
		if tried[a] {
			continue
		}
		tried[a] = true
		conn, err := c.connAt(ctx, a)
		if err == nil {
			var res any
			if res, err = conn.Do(ctx, req); err == nil {
				return res.(*metadata.Response), nil
			}
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("read the cluster's layout: %w: %w", errNoConn, errors.Join(errs...))
}

// apply takes a metadata answer as the layout. Called with mu held.
func (c *Cluster) apply(res *metadata.Response) {
	brokers := make(map[int32]string, len(res.Brokers))
	for _, b := range res.Brokers {
		brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	c.brokers = brokers
	for _, t := range res.Topics {
		if t.ErrorCode != 0 {
			delete(c.leaders, t.Name)
			continue
		}
		n := 0
		for _, p := range t.Partitions {
			n = max(n, int(p.PartitionIndex)+1)
		}
		ps := make([]leader, n)
		for i := range ps {
			ps[i] = leader{id: -1, err: kafka.LeaderNotAvailable}
		}
		for _, p := range t.Partitions {
			ps[p.PartitionIndex] = leader{id: p.LeaderID, err: CodeError(p.ErrorCode, "")}
		}
		c.leaders[t.Name] = ps
	}
	// A connection to an address no broker has any more is of no use.
	for a, conn := range c.conns {
		if !c.isBroker(a) {
			delete(c.conns, a)
			defer conn.Close()
		}
	}
}

// isBroker reports that a is a known broker's address. Called with mu held.
func (c *Cluster) isBroker(a string) bool {
	for _, b := range c.brokers {
		if b == a {
			return true
		}
	}
	return false
}

// Conn is an open connection to broker id (opened if needed).
func (c *Cluster) Conn(ctx context.Context, id int32) (*Conn, error) {
	c.mu.Lock()
	a, ok := c.brokers[id]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("broker %d: %w", id, kafka.BrokerNotAvailable)
	}
	return c.connAt(ctx, a)
}

// connAt is an open connection to address a, opened if there is none (by
// one caller; the others wait for it). A connection that closed, or sat
// idle for idleClose, is replaced.
func (c *Cluster) connAt(ctx context.Context, a string) (*Conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, net.ErrClosed
		}
		if conn := c.conns[a]; conn != nil {
			if conn.Alive(idleClose) {
				c.mu.Unlock()
				return conn, nil
			}
			delete(c.conns, a)
			defer conn.Close()
		}
		d := c.dials[a]
		if d == nil {
			d = &dial{done: make(chan struct{})}
			c.dials[a] = d
			c.mu.Unlock()
			c.open(ctx, a, d)
		} else {
			c.mu.Unlock()
		}
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		switch {
		case d.err == nil:
			return d.conn, nil
		case !d.abandoned || ctx.Err() != nil:
			return nil, &ConnError{Addr: a, Err: d.err}
		}
		// The dial ended with its dialer's context: dial again.
	}
}

// open dials a for d with ctx and keeps the connection.
func (c *Cluster) open(ctx context.Context, a string, d *dial) {
	conn, err := Dial(ctx, c.cfg, a)
	c.mu.Lock()
	delete(c.dials, a)
	if err == nil && c.closed {
		err = net.ErrClosed
		defer conn.Close()
	}
	if err == nil {
		c.conns[a] = conn
	}
	c.mu.Unlock()
	d.conn, d.err, d.abandoned = conn, err, err != nil && ctx.Err() != nil
	close(d.done)
}

// Close closes every connection. Reads and dials under way end by
// themselves within their timeouts, and close what they opened.
func (c *Cluster) Close() {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = make(map[string]*Conn)
	c.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
	}
}

func shuffle[T any](s []T) {
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
}
