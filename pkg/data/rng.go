package data

import "math/bits"

// rng is splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
// number generators", 2014): a 64-bit state advanced by a fixed odd constant
// and a bijective output mix. It is written out here, not taken from
// math/rand, so that the corpus is the same for every Go version.
type rng struct{ state uint64 }

func newRNG(seed uint64) *rng { return &rng{state: seed} }

// next returns the next 64 random bits.
func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n) for n > 0, as the high word of a 64x64-bit
// product (Lemire's method without the rejection step: the bias, below
// n/2^64, is far too small to matter for text generation).
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// between returns a number in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// chance reports true with probability num/den.
func (r *rng) chance(num, den int) bool { return r.intn(den) < num }
