package dashboard

import (
	"strconv"
	"testing"
)

// The ring keeps at most maxHistoryEntries entries and maxHistoryParts
// partition ids, dropping the oldest, and says it dropped some.
func TestHistoryBounds(t *testing.T) {
	var hs history
	for i := range maxHistoryEntries + 10 {
		hs.add([]histEntry{{Kind: histOpen, Member: strconv.Itoa(i)}})
	}
	if len(hs.entries) != maxHistoryEntries || !hs.dropped || hs.entries[0].Member != "10" || hs.seq != maxHistoryEntries+10 {
		t.Fatalf("after %d entries: %d kept, dropped %v, first %q, seq %d", maxHistoryEntries+10, len(hs.entries), hs.dropped, hs.entries[0].Member, hs.seq)
	}
	big := make([]string, maxHistoryParts/2+1)
	for i := range big {
		big[i] = strconv.Itoa(i)
	}
	hs.add([]histEntry{{Kind: histClaim, Parts: big, Count: len(big)}})
	hs.add([]histEntry{{Kind: histClaim, Parts: big, Count: len(big)}})
	if len(hs.entries) != 1 || hs.parts != len(big) {
		t.Fatalf("after two claims of %d partitions each: %d entries, %d ids kept; want the last claim alone", len(big), len(hs.entries), hs.parts)
	}
}
