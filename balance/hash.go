package balance

// The hashes that place partitions and members on the ring.

// hashString is FNV-1a 64 followed by a splitmix64 finalizer (FNV alone has
// weak avalanche on short, similar IDs such as "p-0001", "p-0002").
func hashString(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return mix64(h)
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// score is the rendezvous score of a partition (by hash) for a member (by key).
func score(ph, mkey uint64) uint64 { return mix64(ph ^ mkey) }

// slotPos is the ring position of the k-th quota unit of a member (by hash).
func slotPos(mh uint64, k int) uint64 {
	return mix64(mh ^ mix64(uint64(k)+slotSalt))
}
