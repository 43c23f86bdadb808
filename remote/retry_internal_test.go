package remote

import (
	"testing"
	"time"
)

// Waits stay within [0, min(Max, Base*2^(n-1))] and reach past half of it
// (full jitter, not a fixed delay).
func TestBackoffBounds(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 100, Base: 100 * time.Millisecond, Max: 3 * time.Second}
	for n := 1; n <= 70; n++ {
		ceil := p.Base
		for i := 1; i < n && ceil < p.Max; i++ {
			ceil *= 2
		}
		ceil = min(ceil, p.Max)
		var top time.Duration
		for range 200 {
			d := p.backoff(n)
			if d < 0 || d > ceil {
				t.Fatalf("backoff(%d) = %v, outside [0, %v]", n, d, ceil)
			}
			top = max(top, d)
		}
		if top < ceil/2 {
			t.Errorf("backoff(%d): largest of 200 waits %v, want some above %v", n, top, ceil/2)
		}
	}
}
