package config

import "time"

// MaxSmoothingDelay is the largest smoothing.max_delay accepted (also for the
// X-Streamgate-Smoothing request header): a word held longer than a second
// no longer reads as a smooth stream, it reads as a stall.
const MaxSmoothingDelay = time.Second

// Smoothing makes a model's streams re-chunked on word boundaries (opt-in;
// a request's X-Streamgate-Smoothing header overrides it): content text is
// held until its word ends, and never longer than MaxDelay. A nil
// *Smoothing in Model is off.
type Smoothing struct {
	// MaxDelay is the longest content text is held: 0 < MaxDelay ≤
	// MaxSmoothingDelay. Required.
	MaxDelay Duration `yaml:"max_delay"`
}

// smoothing checks a model's smoothing block (nil: off, nothing to check).
func (v *problems) smoothing(path string, s *Smoothing) {
	if s == nil {
		return
	}
	if d := s.MaxDelay.D(); d <= 0 || d > MaxSmoothingDelay {
		v.add(path+".max_delay", "must be a duration above 0s and at most %v, got %v", MaxSmoothingDelay, d)
	}
}
