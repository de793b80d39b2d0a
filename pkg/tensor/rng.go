package tensor

import "math"

// RNG is a small deterministic random number generator (splitmix64) whose
// whole state is one uint64, so checkpoints can save and restore it exactly
// and results do not depend on the Go version.
type RNG struct {
	State uint64
}

// NewRNG returns a generator seeded with seed.
func NewRNG(seed uint64) *RNG { return &RNG{State: seed} }

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 {
	r.State += 0x9e3779b97f4a7c15
	z := r.State
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Float64 returns a uniform number in [0, 1).
func (r *RNG) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// Float32 returns a uniform number in [0, 1).
func (r *RNG) Float32() float32 { return float32(r.Uint64()>>40) / (1 << 24) }

// Norm returns a standard normal number (Box-Muller, one of the pair).
func (r *RNG) Norm() float64 {
	u1 := r.Float64()
	for u1 == 0 {
		u1 = r.Float64()
	}
	u2 := r.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// Intn returns a uniform integer in [0, n).
func (r *RNG) Intn(n int) int { return int(r.Uint64() % uint64(n)) }
