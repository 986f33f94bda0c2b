package generation

import (
	"fmt"
	"math"
	"time"
)

// Rate is a caller's create rate: a token bucket refilling PerSecond up
// to Burst, stored per owner in the database and taken inside the
// creating transaction (Tx.TakeCreateToken), so it is exact however many
// replicas share the database.
type Rate struct {
	PerSecond float64
	Burst     int
}

// maxRateWait bounds the retry hint of a bucket that refills very slowly.
const maxRateWait = 24 * time.Hour

// Take is the bucket arithmetic the engines share. tokens and updated are
// the stored bucket (found false: none yet, a full one). It returns the
// bucket after one token is taken, or a positive wait (until a token is
// there) and then nothing is to be written. Time is whole milliseconds
// (as stored); a clock behind the stored time refills nothing and never
// moves the bucket back.
func (r Rate) Take(tokens float64, updated time.Time, found bool, now time.Time) (left float64, at time.Time, wait time.Duration) {
	now = now.Truncate(time.Millisecond)
	burst := float64(max(r.Burst, 1))
	if !found {
		tokens, updated = burst, now
	}
	if now.Before(updated) {
		now = updated
	}
	if r.PerSecond > 0 {
		tokens = min(burst, tokens+now.Sub(updated).Seconds()*r.PerSecond)
	}
	if tokens >= 1 {
		return tokens - 1, now, 0
	}
	if !(r.PerSecond > 0) {
		return tokens, updated, maxRateWait
	}
	secs := (1 - tokens) / r.PerSecond
	if secs >= maxRateWait.Seconds() {
		return tokens, updated, maxRateWait
	}
	return tokens, updated, max(time.Duration(math.Ceil(secs*1e9)), time.Millisecond)
}

// FullAt is when a bucket holding tokens at at is full again, stored with
// it: a full bucket's row says no more than no row, so rows past their
// FullAt are deleted (Tx.PruneCreateBuckets) without knowing whose rate
// made them. A bucket that never refills is never full again.
func (r Rate) FullAt(tokens float64, at time.Time) time.Time {
	if !(r.PerSecond > 0) {
		return time.UnixMilli(math.MaxInt64)
	}
	ms := math.Ceil((float64(max(r.Burst, 1)) - tokens) * 1000 / r.PerSecond)
	return at.Add(time.Duration(min(ms, maxFullIn)) * time.Millisecond)
}

// maxFullIn caps FullAt's distance (ms, about 285 years), as the engines'
// queries do, so that it stays a time.Duration.
const maxFullIn = 9e12

// RateError refuses a creation over the caller's create rate: nothing
// was created or charged. RetryAfter is when a token will be there.
type RateError struct{ RetryAfter time.Duration }

func (e *RateError) Error() string {
	return fmt.Sprintf("create rate exceeded: retry after %s", e.RetryAfter.Round(time.Millisecond))
}
