package sink

import "testing"

// TestMurmur2KafkaVectors checks the cases of Apache Kafka's
// UtilsTest.testMurmur2 (clients/src/test/java/.../utils/UtilsTest.java).
func TestMurmur2KafkaVectors(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, tt := range tests {
		if got := int32(murmur2(tt.in)); got != tt.want {
			t.Errorf("murmur2(%q) = %d; want %d", tt.in, got, tt.want)
		}
		if got := int32(murmur2([]byte(tt.in))); got != tt.want {
			t.Errorf("murmur2([]byte(%q)) = %d; want %d", tt.in, got, tt.want)
		}
	}
}

// javaPartitions was printed by kafka-clients 4.1.2 itself:
// Utils.murmur2(key.getBytes(UTF_8)) and
// BuiltInPartitioner.partitionForKey(key, n) for n = 1, 3, 7, 12, 50.
var javaPartitions = []struct {
	key    string
	hash   int32
	wantBy []int // partition for each of javaPartitionCounts
}{
	{"", 275646681, []int{0, 0, 2, 9, 31}},
	{"a", -1563381124, []int{0, 1, 5, 4, 24}},
	{"ab", 316155434, []int{0, 2, 0, 2, 34}},
	{"abc", 479470107, []int{0, 0, 4, 3, 7}},
	{"abcd", -1323649548, []int{0, 2, 5, 8, 0}},
	{"order-1", 1221710326, []int{0, 1, 4, 10, 26}},
	{"order-42", 501153024, []int{0, 0, 1, 0, 24}},
	{"customer-9001", 2137987284, []int{0, 0, 6, 0, 34}},
	{"f47ac10b-58cc-4372-a567-0e02b3c479d0", -144371653, []int{0, 1, 3, 7, 45}},
	{"Ünïcødé-κλειδί", 1993613220, []int{0, 0, 4, 0, 20}},
	{"aggregate/with/slashes", -753459962, []int{0, 0, 6, 6, 36}},
	{"x", 2121525046, []int{0, 1, 4, 10, 46}},
	{"21", -973932308, []int{0, 0, 3, 0, 40}},
	{"foobar", -790332482, []int{0, 0, 0, 6, 16}},
}

var javaPartitionCounts = []int{1, 3, 7, 12, 50}

func TestPartitionForMatchesJavaClient(t *testing.T) {
	for _, tt := range javaPartitions {
		if got := int32(murmur2(tt.key)); got != tt.hash {
			t.Errorf("murmur2(%q) = %d; want %d", tt.key, got, tt.hash)
		}
		for i, n := range javaPartitionCounts {
			if got := partitionFor(tt.key, n); got != tt.wantBy[i] {
				t.Errorf("partitionFor(%q, %d) = %d; want %d", tt.key, n, got, tt.wantBy[i])
			}
		}
	}
}

// TestPartitionForClearsSignBit guards against Math.abs-style partitioning:
// Kafka masks the sign bit, which differs from abs for negative hashes.
func TestPartitionForClearsSignBit(t *testing.T) {
	const key = "a-little-bit-longer-string" // murmur2 = -1486304829
	h := int32(murmur2(key))
	if h >= 0 {
		t.Fatalf("murmur2(%q) = %d; want a negative hash for this test", key, h)
	}
	want := int(uint32(h)&0x7fffffff) % 7
	if abs := int(-h) % 7; abs == want {
		t.Fatalf("test key does not tell masking from abs")
	}
	if got := partitionFor(key, 7); got != want {
		t.Errorf("partitionFor(%q, 7) = %d; want %d", key, got, want)
	}
}

func FuzzPartitionForInRange(f *testing.F) {
	f.Add("order-1", 3)
	f.Fuzz(func(t *testing.T, key string, n int) {
		if n <= 0 || n > 1<<20 {
			return
		}
		if p := partitionFor(key, n); p < 0 || p >= n {
			t.Fatalf("partitionFor(%q, %d) = %d; want in [0, %d)", key, n, p, n)
		}
	})
}
