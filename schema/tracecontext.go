package schema

// HeaderTracestate is the W3C Trace Context tracestate, the vendor part
// that travels beside traceparent.
const HeaderTracestate = "tracestate"

// maxTracestate is the longest tracestate the W3C recommendation asks
// vendors to propagate.
const maxTracestate = 512

// ValidTraceparent reports whether s is a W3C Trace Context traceparent
// walrelay puts on a record: version-traceid-parentid-flags, each in
// lower-case hex, the version 2 digits and not ff, the trace id 32 digits
// and the parent id 16, neither all zeros, the flags 2 digits. Version 00
// is exactly that (55 characters); a later version may go on after a
// further '-', as the recommendation lets future versions extend it.
func ValidTraceparent(s string) bool {
	const size = 55
	if len(s) < size || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := s[0:2], s[3:35], s[36:52], s[53:55]
	if !lowerHex(version) || version == "ff" || !lowerHex(flags) {
		return false
	}
	if !lowerHex(traceID) || allZeros(traceID) || !lowerHex(parentID) || allZeros(parentID) {
		return false
	}
	if len(s) > size {
		return version != "00" && s[size] == '-'
	}
	return true
}

// ValidTracestate reports whether s can go on a record as tracestate: 1 to
// 512 printable ASCII characters. It does not judge the list's members:
// the tracing library that reads it does.
func ValidTracestate(s string) bool {
	if s == "" || len(s) > maxTracestate {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}
