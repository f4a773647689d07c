package leader

import "hash/fnv"

// LockKey is the advisory lock key of slot in database: the FNV-1a 64-bit
// hash of "walrelay\x00" + database + "\x00" + slot, read as an int64 (two's
// complement), as pg_try_advisory_lock(bigint) takes it. The NUL bytes keep
// ("ab", "c") and ("a", "bc") apart; the prefix keeps walrelay's keys away
// from an application's own small-integer keys.
func LockKey(database, slot string) int64 {
	h := fnv.New64a()
	// hash.Hash.Write never returns an error.
	h.Write([]byte("walrelay\x00" + database + "\x00" + slot))
	return int64(h.Sum64())
}

// lockTag splits a key as pg_locks shows a bigint advisory lock: the high
// half in classid, the low half in objid, objsubid 1.
func lockTag(key int64) (classid, objid int64) {
	u := uint64(key)
	return int64(u >> 32), int64(u & 0xffffffff)
}
