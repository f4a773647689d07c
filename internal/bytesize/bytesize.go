// Package bytesize writes byte counts for people, the one way walrelay
// does it (logs, check, status, -h).
//
// Internal: walrelay's own, shared by its packages.
package bytesize

import "fmt"

// Format writes n bytes for people in IEC units: "512 B", "1.5 MiB".
// One decimal above a KiB; a negative n (safe_wal_size can be) keeps its
// sign.
func Format(n int64) string {
	if n < 0 {
		if n == -n { // math.MinInt64 has no positive twin
			return fmt.Sprintf("%d B", n)
		}
		return "-" + Format(-n)
	}
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1023.95 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
