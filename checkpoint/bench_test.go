package checkpoint

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// BenchmarkAddAck: one op is one message added to the open transaction and
// acknowledged. Target: 0 allocs/op.
func BenchmarkAddAck(b *testing.B) {
	tr := New(0)
	id, _ := tr.Begin()
	b.ReportAllocs()
	for b.Loop() {
		_ = tr.Add(id)
		_ = tr.Ack(id)
	}
}

// BenchmarkTxn: one op is one transaction of 10 messages (Begin, 10 Adds,
// Commit, 10 Acks), with acks delayed so 64 transactions are pending, as when
// Kafka lags behind the slot.
func BenchmarkTxn(b *testing.B) {
	const msgs, lag = 10, 64
	tr := New(0)
	end := pglogrepl.LSN(0)
	b.ReportAllocs()
	for b.Loop() {
		id, _ := tr.Begin()
		for range msgs {
			_ = tr.Add(id)
		}
		end += 0x100
		_ = tr.Commit(id, end)
		if id > lag {
			for range msgs {
				_ = tr.Ack(id - lag)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*msgs), "ns/msg")
}

// BenchmarkOutOfOrderAcks: one op is one message; 256 single-message
// transactions are committed, then acked newest first, so every ack but the
// last lands behind a pending transaction and the last one drains them all.
func BenchmarkOutOfOrderAcks(b *testing.B) {
	const batch = 256
	tr := New(0)
	ids := make([]TxnID, batch)
	end := pglogrepl.LSN(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % batch
		id, _ := tr.Begin()
		_ = tr.Add(id)
		end += 0x100
		_ = tr.Commit(id, end)
		ids[k] = id
		if k == batch-1 {
			for j := batch - 1; j >= 0; j-- {
				_ = tr.Ack(ids[j])
			}
		}
	}
}

// BenchmarkKeepalive: keepalives while idle, each one taken.
func BenchmarkKeepalive(b *testing.B) {
	tr := New(0)
	lsn := pglogrepl.LSN(0)
	b.ReportAllocs()
	for b.Loop() {
		lsn++
		tr.Keepalive(lsn)
	}
}
