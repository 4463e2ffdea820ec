package auth

import "time"

// SetClock makes v read the time from now (tests of the refresh interval).
func SetClock(v *Verifier, now func() time.Time) { v.now = now }

// LimiterSize is how many client buckets a's limiter keeps.
func LimiterSize(a *Authenticator) int { return a.limiter.size() }

// SetAuthClock makes a's rate limiter read the time from now.
func SetAuthClock(a *Authenticator, now func() time.Time) { a.now = now }
