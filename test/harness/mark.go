package harness

import (
	"context"
	"sort"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
)

// Position is one record's place in Kafka.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Mark is every partition's end offset of the fixture's topics at one
// moment: taken at a fault, it splits the duplicates that follow by the
// fault that caused them.
type Mark map[Position]int64 // key: Position with Offset 0

// Mark reads the end offsets of every topic of the fixture.
func (f *Fixture) Mark() Mark {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kafkatest.Topics(f.Brokers, f.TopicPrefix+".")
	testkit.Must(f.t, err, "list the fixture's topics")
	ends, err := kafkatest.EndOffsets(ctx, f.Brokers, topics...)
	testkit.Must(f.t, err, "read end offsets")
	m := Mark{}
	for p, end := range ends {
		m[Position{Topic: p.Topic, Partition: p.Partition}] = end
	}
	return m
}

// Records is how many records the mark counts.
func (m Mark) Records() int64 {
	var n int64
	for _, o := range m {
		n += o
	}
	return n
}

// ByFault attributes each duplicate to the last fault marked before it was
// written: marks in the order of the faults. before counts the duplicates
// written before the first fault.
func (r Report) ByFault(marks []Mark) (perFault []int, before int) {
	perFault = make([]int, len(marks))
	for _, pos := range r.Repeats {
		key := Position{Topic: pos.Topic, Partition: pos.Partition}
		i := sort.Search(len(marks), func(i int) bool { return marks[i][key] > pos.Offset })
		if i == 0 {
			before++
		} else {
			perFault[i-1]++
		}
	}
	return perFault, before
}
