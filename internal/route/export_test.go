package route

import "math/rand/v2"

// SetRand pins s's draws to r, for tests that count picks. r is not safe
// for concurrent use: such tests pick from one goroutine.
func SetRand(s *Set, r *rand.Rand) { s.intn = r.IntN }
