package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
)

var codecs = []compress.Compression{compress.None, compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd}

func sampleRecords(n int) []Record {
	t0 := time.UnixMilli(1_765_000_000_000)
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{
			Time:  t0.Add(time.Duration(i%7) * time.Millisecond),
			Key:   []byte(fmt.Sprintf("order-%d", i%13)),
			Value: bytes.Repeat([]byte(fmt.Sprintf(`{"i":%d}`, i)), 1+i%5),
			Headers: []kafka.Header{
				{Key: "ce_id", Value: []byte(fmt.Sprintf("id-%d", i))},
				{Key: "empty", Value: []byte{}},
			},
		}
	}
	out[0].Key = nil       // a null key
	out[n-1].Value = nil   // a tombstone
	out[n-1].Headers = nil // no headers
	return out
}

// readBack is a record as kafka-go's reader gave it.
type readBack struct {
	Offset     int64
	Time       time.Time
	Key, Value []byte
	Headers    []protocol.Header
}

// read decodes a batch with kafka-go's reader, which checks its CRC.
func read(t *testing.T, b []byte) []readBack {
	t.Helper()
	var rs protocol.RecordSet
	sized := binary.BigEndian.AppendUint32(nil, uint32(len(b))) // as a fetch answer holds it
	if _, err := rs.ReadFrom(bytes.NewReader(append(sized, b...))); err != nil {
		t.Fatalf("read the batch back: %v", err)
	}
	if rs.Records == nil {
		t.Fatal("read the batch back: no records (its length or header did not parse)")
	}
	var out []readBack
	for {
		r, err := rs.Records.ReadRecord() // the reader reuses r
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read a record back: %v", err)
		}
		out = append(out, readBack{Offset: r.Offset, Time: r.Time, Key: bytesOf(t, r.Key), Value: bytesOf(t, r.Value),
			Headers: append([]protocol.Header(nil), r.Headers...)})
	}
}

func bytesOf(t *testing.T, b protocol.Bytes) []byte {
	t.Helper()
	if b == nil {
		return nil
	}
	v, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBatchReadsBackWithEveryCodec(t *testing.T) {
	want := sampleRecords(50)
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			b, err := AppendBatch(nil, &Batch{ProducerID: 4242, ProducerEpoch: 3, BaseSequence: 1000, Compression: c, Records: want})
			if err != nil {
				t.Fatal(err)
			}
			got := read(t, b)
			if len(got) != len(want) {
				t.Fatalf("read %d records; want %d", len(got), len(want))
			}
			for i, r := range got {
				w := want[i]
				k, v := r.Key, r.Value
				if r.Offset != int64(i) || !r.Time.Equal(w.Time) || !bytes.Equal(k, w.Key) || (k == nil) != (w.Key == nil) ||
					!bytes.Equal(v, w.Value) || (v == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: got offset %d time %v key %q value %q headers %v; want %d %v %q %q %v",
						i, r.Offset, r.Time, k, v, r.Headers, i, w.Time, w.Key, w.Value, w.Headers)
				}
				for j, h := range r.Headers {
					if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: got %s=%q; want %s=%q", i, j, h.Key, h.Value, w.Headers[j].Key, w.Headers[j].Value)
					}
				}
			}
			be := binary.BigEndian
			if pid, epoch, seq, attr := int64(be.Uint64(b[43:])), int16(be.Uint16(b[51:])), int32(be.Uint32(b[53:])), be.Uint16(b[21:]); pid != 4242 || epoch != 3 || seq != 1000 || attr != uint16(c) {
				t.Fatalf("header: producer %d epoch %d sequence %d attributes %d; want 4242 3 1000 %d", pid, epoch, seq, attr, c)
			}
		})
	}
}

func TestBatchOfNoRecordsIsRefused(t *testing.T) {
	if _, err := AppendBatch(nil, &Batch{}); err == nil {
		t.Fatal("AppendBatch of no records: got nil; want an error")
	}
}

func TestBatchAppendsAfterWhatDstHolds(t *testing.T) {
	first, err := AppendBatch(nil, &Batch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: sampleRecords(3)})
	if err != nil {
		t.Fatal(err)
	}
	both, err := AppendBatch(append([]byte(nil), first...), &Batch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: sampleRecords(4)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(both[:len(first)], first) {
		t.Fatal("the first batch changed when a second was appended")
	}
	if got := read(t, both[len(first):]); len(got) != 4 {
		t.Fatalf("the second batch reads back as %d records; want 4", len(got))
	}
}

func TestVarintLenMatchesTheEncoding(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 8191, 8192, 1 << 40, -(1 << 40), 1<<63 - 1, -1 << 63} {
		if got, want := varintLen(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintLen(%d) = %d; want %d", v, got, want)
		}
	}
}

func TestRecordSetIsTheBatchAfterItsSize(t *testing.T) {
	b := &Batch{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, Compression: compress.Zstd, Records: sampleRecords(5)}
	set, err := AppendRecordSet([]byte("x"), b)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := AppendBatch(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if set[0] != 'x' || binary.BigEndian.Uint32(set[1:]) != uint32(len(batch)) || !bytes.Equal(set[5:], batch) {
		t.Fatalf("record set %x; want x, the size %d, then the batch", set, len(batch))
	}
}
