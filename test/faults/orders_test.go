//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// shopOrders is how many orders the business-outcome test submits.
const shopOrders = 2000

// shopFailpoint kills warehouse instance A between its database commit and
// its offset commit.
const shopFailpoint = "inbox-after-commit@300"

// TestShopBusinessOutcome runs the example services as users run them: the
// order service takes 2,000 orders over HTTP (about 10% retried with the
// same Idempotency-Key: after the answer, concurrently, after a client
// timeout); walrelay, killed twice during the load, publishes their
// messages; two warehouse instances with the same consumer id but in two
// consumer groups receive every message both, one of them killed between
// its database commit and its offset commit. In the end: one order per key,
// one message per order, every message in Kafka, and exactly one
// reservation per order, nothing missing.
func TestShopBusinessOutcome(t *testing.T) {
	parallel(t)
	began := time.Now()
	f := harness.New(t, orderevents.AggregateType)
	ordersBin, warehouseBin := shopBuild(t)
	s := shopSetup(t, f)

	relay := f.Start()
	svc := shopStartOrders(t, f, ordersBin, s)
	whB := shopStartWarehouse(t, f, warehouseBin, s, "b", "g2_"+f.ID, nil)
	whA := shopStartWarehouse(t, f, warehouseBin, s, "a", "g1_"+f.ID, []string{"WALRELAY_FAILPOINT=" + shopFailpoint})
	warehouses := []*shopProc{whB, whA}
	relay.WaitStarted()

	load := shopSubmitAsync(svc.addr, shopOrders)
	var killedAt []int64 // orders submitted at each relay kill
	for _, at := range []int64{shopOrders * 3 / 10, shopOrders * 65 / 100} {
		load.waitProgress(t, at, time.Minute)
		if load.ended() {
			t.Errorf("the load ended before relay kill %d: the kill is not under load", len(killedAt)+1)
		}
		relay.Running()
		relay.Kill()
		killedAt = append(killedAt, load.progress.Load())
		time.Sleep(200 * time.Millisecond)
		relay = f.Run()
		relay.WaitStarted()
	}
	res := load.wait(t, 2*time.Minute)

	whA.WaitFailpoint(shopFailpoint, time.Minute)
	whA = shopStartWarehouse(t, f, warehouseBin, s, "a (restarted)", "g1_"+f.ID, nil)
	warehouses = append(warehouses, whA)

	s.waitReservations(t, 2*time.Minute, relay, whA, whB)
	s.waitGroupsCaughtUp(t, f, time.Minute, "g1_"+f.ID, "g2_"+f.ID)
	for _, p := range []*shopProc{whA, whB, svc} {
		if code := p.Stop(); code != 0 {
			t.Errorf("%s exit code after SIGTERM = %d; want 0\n%s", p.Name, code, p.Tail(30))
		}
	}
	if code := relay.Stop(); code != 0 {
		t.Errorf("walrelay exit code after SIGTERM = %d; want 0", code)
	}

	rows := f.OutboxRows()
	s.checkOrders(t, res)
	s.checkOutbox(t, res, rows)
	rep := f.Verify(rows)
	harness.AssertClean(t, rep, len(rows)) // a replay repeats at most what was written
	reservations := s.checkReservations(t)
	duplicates := 0
	for _, p := range warehouses {
		duplicates += strings.Count(p.Output(), `"duplicate message skipped"`)
	}
	// Each group handles every record at least once, and group G1 the record
	// it was killed at once more; exactly one handling per order applies.
	if least := 2*rep.Delivered + 1 - shopOrders; duplicates < least {
		t.Errorf("duplicates recognised = %d; want at least %d (two groups x %d records + 1 redelivery - %d applied)",
			duplicates, least, rep.Delivered, shopOrders)
	}
	t.Logf("%s: orders %d, replayed HTTP requests %d (of %d retried orders, %d key reuses refused), outbox rows %d, Kafka records %d (%d duplicates), reservations %d, duplicates recognised %d, relay kills %d (at %v orders submitted), consumer kills 1, run time %s",
		t.Name(), len(res.orders), res.replays, res.retried, res.refused, len(rows), rep.Delivered, rep.Duplicates,
		reservations, duplicates, len(killedAt), killedAt, time.Since(began).Round(time.Millisecond))
}

// shopBuild builds the two example services (with failpoints) at once.
func shopBuild(t *testing.T) (orders, warehouse string) {
	t.Helper()
	dir := t.TempDir()
	const pkg = "github.com/walrelay/walrelay/examples/"
	var g errgroup.Group
	g.Go(func() (err error) { orders, err = harness.Build(dir, pkg+"orders", "failpoints"); return err })
	g.Go(func() (err error) { warehouse, err = harness.Build(dir, pkg+"warehouse", "failpoints"); return err })
	testkit.Must(t, g.Wait(), "build the example services")
	return orders, warehouse
}

// shopRig is the test's private shop: the order service's tables in the
// fixture's database, and a database of the warehouse's own.
type shopRig struct {
	orders, keys string // tables in f's database
	whURL        string // the warehouse database
	f            *harness.Fixture
	wh           *pgxpool.Pool
}

func shopSetup(t *testing.T, f *harness.Fixture) *shopRig {
	t.Helper()
	s := &shopRig{orders: "orders_" + f.ID, keys: "idem_" + f.ID, f: f}
	f.PG.DropTable(s.orders, s.keys)
	s.whURL, s.wh = f.PG.CreateDatabase("wh_" + f.ID)
	kafkatest.DeleteGroupsAtCleanup(t, f.Brokers, "g1_"+f.ID, "g2_"+f.ID)
	return s
}

// shopStartOrders runs the order service against the fixture's outbox and
// waits until it answers /healthz.
func shopStartOrders(t *testing.T, f *harness.Fixture, bin string, s *shopRig) *shopProc {
	t.Helper()
	addr := testkit.FreePort(t)
	p := shopStart(t, "orders", bin, nil, "--postgres-url", f.PGURL, "--listen", addr,
		"--outbox-table", "public."+f.Table, "--publication", f.Publication,
		"--orders-table", "public."+s.orders, "--idempotency-table", "public."+s.keys)
	p.addr = "http://" + addr
	poll.EventuallyEvery(t, time.Minute, 50*time.Millisecond, "the order service answering /healthz", func() (string, bool) {
		resp, err := shopHTTP.Get(p.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return "", true
			}
		}
		p.Running()
		return "no answer; its output:\n" + p.Tail(30), false
	})
	return p
}

// shopStartWarehouse runs a warehouse instance in group, with consumer id
// "warehouse" like every instance.
func shopStartWarehouse(t *testing.T, f *harness.Fixture, bin string, s *shopRig, name, group string, env []string) *shopProc {
	t.Helper()
	return shopStart(t, "warehouse "+name, bin, env, "--postgres-url", s.whURL, "--kafka-brokers", f.Brokers,
		"--topic", f.Topic(orderevents.AggregateType), "--group", group, "--consumer-id", "warehouse")
}

// waitReservations waits until every order has a reservation, failing
// early when a process died.
func (s *shopRig) waitReservations(t *testing.T, within time.Duration, relay *harness.Relay, procs ...*shopProc) {
	t.Helper()
	poll.EventuallyEvery(t, within, 250*time.Millisecond, fmt.Sprintf("%d orders with a reservation", shopOrders), func() (string, bool) {
		var got int
		err := s.wh.QueryRow(context.Background(), "SELECT count(DISTINCT order_id) FROM reservations").Scan(&got)
		testkit.Must(t, err, "count reservations")
		if got >= shopOrders {
			return "", true
		}
		relay.Running()
		for _, p := range procs {
			p.Running()
		}
		return fmt.Sprintf("%d orders with a reservation", got), false
	})
}

// waitGroupsCaughtUp waits until each group committed the end offset of
// every partition: every record was handled by both groups.
func (s *shopRig) waitGroupsCaughtUp(t *testing.T, f *harness.Fixture, within time.Duration, groups ...string) {
	t.Helper()
	topic := f.Topic(orderevents.AggregateType)
	deadline := time.Now().Add(within)
	for _, g := range groups {
		poll.EventuallyEvery(t, time.Until(deadline), 250*time.Millisecond, fmt.Sprintf("group %s at the end of %s", g, topic), func() (string, bool) {
			behind := shopLag(t, f, g, topic)
			return fmt.Sprintf("group %s %d records behind", g, behind), behind == 0
		})
	}
}

// shopLag is how many records of topic group has not committed.
func shopLag(t *testing.T, f *harness.Fixture, group, topic string) int64 {
	t.Helper()
	end := f.Mark()
	var parts []int
	for pos := range end {
		if pos.Topic == topic {
			parts = append(parts, int(pos.Partition))
		}
	}
	committed, err := kafkatest.Committed(context.Background(), f.Brokers, group, topic, parts)
	testkit.Must(t, err, "fetch the offsets of group %s", group)
	var behind int64
	for _, p := range parts {
		if c := max(committed[p], 0); c < end[harness.Position{Topic: topic, Partition: int32(p)}] {
			behind += end[harness.Position{Topic: topic, Partition: int32(p)}] - c
		}
	}
	return behind
}

// shopProc is a running example service.
type shopProc struct {
	*harness.Process
	addr string // the order service's base URL
}

func shopStart(t *testing.T, name, bin string, env []string, args ...string) *shopProc {
	t.Helper()
	return &shopProc{Process: harness.StartProcess(t, name, bin, env, args...)}
}

// shopHTTP is the clients' HTTP client.
var shopHTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

// shopOrder is one order as the clients submit it: every attempt sends the
// same key, body, request id and traceparent.
type shopOrder struct {
	i                               int
	key, body, request, traceparent string
}

func shopNewOrder(run string, i int) shopOrder {
	items := make([]string, 1+i%3)
	for j := range items {
		items[j] = fmt.Sprintf(`{"sku":"SKU-%d","quantity":%d}`, (i+j)%50, 1+(i+j)%4)
	}
	return shopOrder{
		i: i, key: fmt.Sprintf("order-%s-%d", run, i),
		body:        fmt.Sprintf(`{"customer_email":"c%d@example.com","items":[%s]}`, i, strings.Join(items, ",")),
		request:     fmt.Sprintf("req-%d", i),
		traceparent: fmt.Sprintf("00-%032x-%016x-01", i+1, i+1),
	}
}

// shopAnswer is one HTTP answer.
type shopAnswer struct {
	status   int
	replayed bool
	body     string
}

func shopPost(client *http.Client, base string, o shopOrder, body string) (shopAnswer, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(body))
	if err != nil {
		return shopAnswer{}, err
	}
	req.Header.Set("Idempotency-Key", o.key)
	req.Header.Set("X-Request-Id", o.request)
	req.Header.Set("traceparent", o.traceparent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return shopAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return shopAnswer{}, err
	}
	return shopAnswer{resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", string(b)}, nil
}

// shopResult is what the load saw.
type shopResult struct {
	run                       string              // the keys' common part
	orders                    map[int]shopCreated // by order index
	replays, retried, refused int
}

type shopCreated struct {
	OrderID   string `json:"order_id"`
	MessageID string `json:"message_id"`
}

// shopLoad submits orders from 8 clients in the background.
type shopLoad struct {
	base     string
	progress atomic.Int64
	mu       sync.Mutex
	res      shopResult
	errs     []string
	done     chan struct{}
}

func shopSubmitAsync(base string, n int) *shopLoad {
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	l := &shopLoad{base: base, done: make(chan struct{}), res: shopResult{run: run, orders: map[int]shopCreated{}}}
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				l.submit(shopNewOrder(run, i))
				l.progress.Add(1)
				time.Sleep(30 * time.Millisecond) // paced: the load outlasts the relay kills
			}
		}()
	}
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		close(l.done)
	}()
	return l
}

// submit sends one order: 90% once; every tenth is retried with the same
// key and body, in turn after its answer, concurrently, or after a client
// timeout; every hundredth (of the others) then reuses its key for another
// body, which must be refused.
func (l *shopLoad) submit(o shopOrder) {
	var answers []shopAnswer
	var err error
	switch {
	case o.i%10 != 0:
		answers, err = l.post(o, 1)
	case o.i/10%3 == 0:
		answers, err = l.post(o, 1)
		if err == nil {
			more, e := l.post(o, 1)
			answers, err = append(answers, more...), e
		}
	case o.i/10%3 == 1:
		answers, err = l.post(o, 2)
	default:
		hasty := &http.Client{Timeout: time.Duration(1+o.i%5) * time.Millisecond}
		shopPost(hasty, l.base, o, o.body) //nolint:errcheck // the answer is ignored on purpose
		answers, err = l.post(o, 1)
	}
	if err == nil {
		err = l.record(o, answers)
	}
	if err == nil && o.i%100 == 55 {
		err = l.reuse(o)
	}
	if err != nil {
		l.mu.Lock()
		l.errs = append(l.errs, fmt.Sprintf("order %d: %v", o.i, err))
		l.mu.Unlock()
	}
}

// post sends o n times at once and returns the answers.
func (l *shopLoad) post(o shopOrder, n int) ([]shopAnswer, error) {
	answers := make([]shopAnswer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[k], errs[k] = shopPost(shopHTTP, l.base, o, o.body)
		}()
	}
	wg.Wait()
	for k := range n {
		if errs[k] != nil {
			return nil, errs[k]
		}
		if answers[k].status != http.StatusCreated {
			return nil, fmt.Errorf("status %d (%s); want 201", answers[k].status, answers[k].body)
		}
	}
	return answers, nil
}

// record checks o's answers (one body for all, at most one not replayed,
// exactly one when the first attempt's answer was read) and keeps it.
func (l *shopLoad) record(o shopOrder, answers []shopAnswer) error {
	fresh := 0
	for _, a := range answers {
		if a.body != answers[0].body {
			return fmt.Errorf("answers differ: %s and %s", answers[0].body, a.body)
		}
		if !a.replayed {
			fresh++
		}
	}
	hasty := o.i%10 == 0 && o.i/10%3 == 2 // its first attempt's answer was not read
	if fresh > 1 || (fresh == 0 && !hasty) {
		return fmt.Errorf("%d of %d answers not replayed; want exactly 1", fresh, len(answers))
	}
	var c shopCreated
	if err := json.Unmarshal([]byte(answers[0].body), &c); err != nil || c.OrderID == "" || c.MessageID == "" {
		return fmt.Errorf("answer %s: not an order_id and message_id (%v)", answers[0].body, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.res.orders[o.i] = c
	l.res.replays += len(answers) - fresh
	if len(answers) > 1 || hasty {
		l.res.retried++
	}
	return nil
}

// reuse sends another body under o's key: 422.
func (l *shopLoad) reuse(o shopOrder) error {
	a, err := shopPost(shopHTTP, l.base, o, strings.Replace(o.body, "@example.com", "@example.org", 1))
	if err != nil {
		return err
	}
	if a.status != http.StatusUnprocessableEntity {
		return fmt.Errorf("key reused for another body: status %d (%s); want 422", a.status, a.body)
	}
	l.mu.Lock()
	l.res.refused++
	l.mu.Unlock()
	return nil
}

// ended reports whether every order was submitted.
func (l *shopLoad) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// waitProgress waits until at least n orders were submitted (or all were).
func (l *shopLoad) waitProgress(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	poll.Eventually(t, within, fmt.Sprintf("%d orders submitted (or the load ended)", n), func() (string, bool) {
		select {
		case <-l.done:
			return "", true
		default:
		}
		got := l.progress.Load()
		return fmt.Sprintf("%d orders submitted", got), got >= n
	})
}

// wait waits for the load to end and fails the test on any client error.
func (l *shopLoad) wait(t *testing.T, within time.Duration) shopResult {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(within):
		t.Fatalf("the load did not end within %s (%d submitted)", within, l.progress.Load())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Fatalf("%d orders failed, first: %s", len(l.errs), strings.Join(l.errs[:min(5, len(l.errs))], " | "))
	}
	return l.res
}

// byOrderID maps each answered order id to its order's index, failing the
// test when two keys got the same order.
func (r shopResult) byOrderID(t *testing.T) map[string]int {
	t.Helper()
	if len(r.orders) != shopOrders {
		t.Fatalf("orders answered with 201 = %d; want %d", len(r.orders), shopOrders)
	}
	by := map[string]int{}
	for i, c := range r.orders {
		if j, dup := by[c.OrderID]; dup {
			t.Fatalf("keys of orders %d and %d both got order %s", i, j, c.OrderID)
		}
		by[c.OrderID] = i
	}
	return by
}

// checkOrders: the orders table holds exactly the answered orders, one per
// key, as submitted, and the keys table one row per key.
func (s *shopRig) checkOrders(t *testing.T, res shopResult) {
	t.Helper()
	by := res.byOrderID(t)
	bad := &shopProblems{what: "orders"}
	defer bad.report(t)
	rows, err := s.f.DB.Query(context.Background(), "SELECT order_id::text, customer_email, items::text FROM "+s.orders)
	testkit.Must(t, err, "read the orders")
	n := 0
	for rows.Next() {
		var id, email, items string
		testkit.Must(t, rows.Scan(&id, &email, &items), "scan an order")
		n++
		i, ok := by[id]
		if !ok {
			bad.add("order %s in the table was answered to no key", id)
			continue
		}
		want := shopNewOrder(res.run, i)
		if !strings.Contains(want.body, `"customer_email":"`+email+`"`) || !shopSameItems(t, want.body, items) {
			bad.add("order %s = %s %s; want the body %s", id, email, items, want.body)
		}
	}
	testkit.Must(t, rows.Err(), "read the orders")
	if n != shopOrders {
		t.Errorf("orders in the table = %d; want %d", n, shopOrders)
	}
	var keys int
	testkit.Must(t, s.f.DB.QueryRow(context.Background(), "SELECT count(*) FROM "+s.keys).Scan(&keys), "count keys")
	if keys != shopOrders {
		t.Errorf("idempotency keys = %d; want %d", keys, shopOrders)
	}
}

// shopSameItems compares the items of a request body with an items column.
func shopSameItems(t *testing.T, body, items string) bool {
	t.Helper()
	var req struct{ Items []orderevents.Item }
	var got []orderevents.Item
	testkit.Must(t, json.Unmarshal([]byte(body), &req), "decode %s", body)
	testkit.Must(t, json.Unmarshal([]byte(items), &got), "decode %s", items)
	return slices.Equal(req.Items, got)
}

// checkOutbox: one order.submitted.v1 row per order, with the message id
// the client was given, version 1, and the request's correlation id and
// traceparent in its headers.
func (s *shopRig) checkOutbox(t *testing.T, res shopResult, rows []harness.Row) {
	t.Helper()
	by := res.byOrderID(t)
	if len(rows) != shopOrders {
		t.Errorf("outbox rows = %d; want %d", len(rows), shopOrders)
	}
	bad := &shopProblems{what: "outbox rows"}
	defer bad.report(t)
	seen := map[string]bool{}
	for _, r := range rows {
		i, ok := by[r.AggregateID]
		switch {
		case !ok:
			bad.add("outbox row %s: aggregate %q is no answered order", r.ID, r.AggregateID)
			continue
		case seen[r.AggregateID]:
			bad.add("order %s has more than one outbox row", r.AggregateID)
		}
		seen[r.AggregateID] = true
		o := shopNewOrder(res.run, i)
		var sub orderevents.Submitted
		testkit.Must(t, json.Unmarshal([]byte(r.Payload), &sub), "decode the payload of %s", r.ID)
		if r.ID != res.orders[i].MessageID || r.AggregateType != orderevents.AggregateType || r.Type != orderevents.TypeSubmitted ||
			r.Version == nil || *r.Version != 1 || sub.OrderID != r.AggregateID || r.Headers["correlation_id"] != o.request ||
			r.Headers["traceparent"] != o.traceparent {
			bad.add("outbox row %+v (payload %s); want message id %s, type %s, version 1, correlation_id %s, traceparent %s",
				r, r.Payload, res.orders[i].MessageID, orderevents.TypeSubmitted, o.request, o.traceparent)
		}
	}
}

// checkReservations: exactly one reservation per order, with the order's
// items, none for an unknown order, and one inbox row per message. It
// returns the number of reservations.
func (s *shopRig) checkReservations(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	orders := map[string]string{} // order id: items
	rows, err := s.f.DB.Query(ctx, "SELECT order_id::text, items::text FROM "+s.orders)
	testkit.Must(t, err, "read the orders")
	for rows.Next() {
		var id, items string
		testkit.Must(t, rows.Scan(&id, &items), "scan an order")
		orders[id] = items
	}
	testkit.Must(t, rows.Err(), "read the orders")
	rows, err = s.wh.Query(ctx, "SELECT order_id::text, items::text FROM reservations")
	testkit.Must(t, err, "read the reservations")
	bad := &shopProblems{what: "reservations"}
	defer bad.report(t)
	count := map[string]int{}
	n := 0
	for rows.Next() {
		var id, items string
		testkit.Must(t, rows.Scan(&id, &items), "scan a reservation")
		n++
		count[id]++
		if want, ok := orders[id]; !ok || items != want {
			bad.add("reservation of order %s with items %s; the order has %q (known: %v)", id, items, want, ok)
		}
	}
	testkit.Must(t, rows.Err(), "read the reservations")
	for id := range orders {
		if count[id] != 1 {
			bad.add("reservations of order %s = %d; want 1", id, count[id])
		}
	}
	if n != shopOrders {
		t.Errorf("reservations = %d; want %d", n, shopOrders)
	}
	var inboxRows int
	testkit.Must(t, s.wh.QueryRow(ctx, "SELECT count(*) FROM inbox_messages WHERE consumer_id = 'warehouse'").Scan(&inboxRows), "count inbox rows")
	if inboxRows != shopOrders {
		t.Errorf("inbox rows of consumer warehouse = %d; want %d", inboxRows, shopOrders)
	}
	return n
}

// shopProblems collects the problems of many rows, to report them once: how
// many, and the first few.
type shopProblems struct {
	what string
	list []string
}

func (p *shopProblems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *shopProblems) report(t *testing.T) {
	t.Helper()
	if len(p.list) > 0 {
		t.Errorf("%s: %d problems, first: %s", p.what, len(p.list), strings.Join(p.list[:min(5, len(p.list))], " | "))
	}
}
