package kafkawire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// Record is one record of a batch. A nil Key or Value is null.
type Record struct {
	Time    time.Time
	Key     []byte
	Value   []byte
	Headers []kafka.Header
}

// Batch is what a producer writes to one partition in one request: a
// record batch of magic 2 (KIP-98). kafka-go's own encoder always writes
// producer id -1; an idempotent producer's batches carry its id, epoch and
// the partition's sequence, so they are encoded here.
type Batch struct {
	// ProducerID, ProducerEpoch and BaseSequence are the idempotent
	// producer's (KIP-98); -1, -1 and -1 for a producer that is not.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Compression of the records (the batch's header stays plain).
	Compression compress.Compression
	Records     []Record
}

// The layout of a record batch header (magic 2), in bytes from its start.
const (
	batchOffsetsLen = 8 + 4 // baseOffset, batchLength: before what batchLength counts
	crcEnd          = 8 + 4 + 4 + 1 + 4
	batchHeaderLen  = crcEnd + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4 // to the first record
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendBatch appends b, encoded as a record batch of magic 2, to dst. The
// batch's base offset is 0 (the broker assigns offsets), its partition
// leader epoch -1 (a producer does not know it), its timestamps create time.
func AppendBatch(dst []byte, b *Batch) ([]byte, error) {
	if len(b.Records) == 0 {
		return dst, fmt.Errorf("a record batch needs at least one record")
	}
	start := len(dst)
	base := b.Records[0].Time.UnixMilli()
	maxTime := base
	plain := b.Compression == compress.None
	// The records' size is known before they are written: the buffer is
	// grown once (appending a drain's half-megabyte batches grew and
	// copied it a dozen times, a quarter of walrelay's CPU at 1 KB).
	size := 0
	for i := range b.Records {
		r := &b.Records[i]
		n := recordBodyLen(r, int32(i), r.Time.UnixMilli()-base)
		size += varintLen(int64(n)) + n
	}
	var body []byte // the records, when they are compressed
	if plain {
		dst = slices.Grow(dst, batchHeaderLen+size)
	} else {
		body = make([]byte, 0, size)
	}
	dst = append(dst, make([]byte, batchHeaderLen)...)
	for i := range b.Records {
		r := &b.Records[i]
		maxTime = max(maxTime, r.Time.UnixMilli())
		if plain {
			dst = appendRecord(dst, r, int32(i), r.Time.UnixMilli()-base)
		} else {
			body = appendRecord(body, r, int32(i), r.Time.UnixMilli()-base)
		}
	}
	if !plain {
		var err error
		if dst, err = appendCompressed(dst, b.Compression, body); err != nil {
			return dst[:start], err
		}
	}
	h := dst[start:]
	be := binary.BigEndian
	be.PutUint64(h[0:], 0)                                       // baseOffset
	be.PutUint32(h[8:], uint32(len(h)-batchOffsetsLen))          // batchLength
	be.PutUint32(h[12:], 0xffffffff)                             // partitionLeaderEpoch: -1
	h[16] = 2                                                    // magic
	be.PutUint16(h[21:], uint16(b.Compression)&0x7)              // attributes: create time, not transactional
	be.PutUint32(h[23:], uint32(len(b.Records)-1))               // lastOffsetDelta
	be.PutUint64(h[27:], uint64(base))                           // baseTimestamp
	be.PutUint64(h[35:], uint64(maxTime))                        // maxTimestamp
	be.PutUint64(h[43:], uint64(b.ProducerID))                   // producerId
	be.PutUint16(h[51:], uint16(b.ProducerEpoch))                // producerEpoch
	be.PutUint32(h[53:], uint32(b.BaseSequence))                 // baseSequence
	be.PutUint32(h[57:], uint32(len(b.Records)))                 // records
	be.PutUint32(h[17:], crc32.Checksum(h[crcEnd:], castagnoli)) // crc of attributes to the end
	return dst, nil
}

// appendCompressed appends body compressed with c.
func appendCompressed(dst []byte, c compress.Compression, body []byte) ([]byte, error) {
	codec := c.Codec()
	if codec == nil {
		return dst, fmt.Errorf("unknown compression %d", c)
	}
	buf := bytes.NewBuffer(dst)
	w := codec.NewWriter(buf)
	if _, err := w.Write(body); err != nil {
		return dst, fmt.Errorf("compress with %s: %w", codec.Name(), err)
	}
	if err := w.Close(); err != nil {
		return dst, fmt.Errorf("compress with %s: %w", codec.Name(), err)
	}
	return buf.Bytes(), nil
}

// appendRecord appends one record: its length, then attributes, timestamp
// and offset deltas, key, value and headers, integers as zigzag varints.
// recordBodyLen is the length of r's encoding after its length varint.
func recordBodyLen(r *Record, offsetDelta int32, timeDelta int64) int {
	size := 1 + varintLen(timeDelta) + varintLen(int64(offsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return size
}

func appendRecord(dst []byte, r *Record, offsetDelta int32, timeDelta int64) []byte {
	size := recordBodyLen(r, offsetDelta, timeDelta)
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, 0) // attributes: none defined for records
	dst = binary.AppendVarint(dst, timeDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

// appendBytes appends b with its length, -1 for nil (null).
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the length of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// AppendRecordSet appends b as a produce request's record set carries it:
// its size in bytes, then the batch. protocol.RawRecordSet takes these
// bytes as they are.
func AppendRecordSet(dst []byte, b *Batch) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := AppendBatch(dst, b)
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}
