package authn

import (
	"net/netip"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// sharedAddresses finds client addresses that carry the tokens of many
// subjects: usually a proxy in front of the edge that
// listen.client_address does not name, so that every per-address bound
// (failed authentications, preflights, connections) is shared by all its
// clients, and one client's misbehaviour becomes everyone's refusals. It
// is fed on token verifications only (a cache miss: a signature check costs
// far more than this), and bounded: the addresses followed, and the
// subjects remembered for each up to the threshold.
type sharedAddresses struct {
	threshold int
	// found is called once per address, when its subjects reach threshold.
	found func(addr netip.Addr, subjects int)

	mu    sync.Mutex
	addrs *simplelru.LRU[netip.Addr, *subjectsSeen]
}

// subjectsSeen are the distinct subjects seen from one address (by the
// first 8 bytes of their SHA-256), until the threshold is reached.
type subjectsSeen struct {
	sums     map[uint64]struct{}
	reported bool
}

// maxFollowedAddresses bounds the addresses whose subjects are counted.
const maxFollowedAddresses = 10_000

func newSharedAddresses(threshold int, found func(netip.Addr, int)) *sharedAddresses {
	lru, _ := simplelru.NewLRU[netip.Addr, *subjectsSeen](maxFollowedAddresses, nil) // size > 0: no error
	return &sharedAddresses{threshold: threshold, found: found, addrs: lru}
}

// saw notes a verified token of the subject whose SHA-256 begins with sum,
// from addr.
func (s *sharedAddresses) saw(addr netip.Addr, sum uint64) {
	key := addressKey(addr)
	s.mu.Lock()
	seen, ok := s.addrs.Get(key)
	if !ok {
		seen = &subjectsSeen{sums: map[uint64]struct{}{}}
		s.addrs.Add(key, seen)
	}
	if seen.reported {
		s.mu.Unlock()
		return
	}
	seen.sums[sum] = struct{}{}
	n := len(seen.sums)
	if n >= s.threshold {
		seen.reported, seen.sums = true, nil
	}
	s.mu.Unlock()
	if n >= s.threshold {
		s.found(key, n)
	}
}
