package sink

// murmur2 is the 32-bit MurmurHash2 exactly as Apache Kafka's Java client
// computes it (org.apache.kafka.common.utils.Utils.murmur2): seed 0x9747b28c,
// little-endian 4-byte blocks, Java's fall-through tail. Java works on signed
// ints; uint32 arithmetic gives the same bits, and Java's >>> is Go's >> on
// an unsigned value. It takes a string or bytes so that keys are hashed
// without a copy.
func murmur2[T string | []byte](data T) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	n := len(data) &^ 3
	for i := 0; i < n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(data) & 3 {
	case 3:
		h ^= uint32(data[n+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[n+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[n])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// partitionFor is Kafka's keyed-record rule (DefaultPartitioner before 3.3,
// BuiltInPartitioner.partitionForKey since): toPositive(murmur2(key)) %
// numPartitions, where toPositive clears the sign bit (it is not Math.abs).
// numPartitions must be positive. The key's bytes are the aggregate id's
// UTF-8 bytes, as Java's StringSerializer produces them.
func partitionFor(key string, numPartitions int) int {
	return int(murmur2(key)&0x7fffffff) % numPartitions
}
