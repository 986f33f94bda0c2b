package provider

import (
	"math/rand/v2"
	"time"
)

// Polling bounds used by NextPoll.
const (
	// PollFloor is the shortest wait NextPoll ever returns.
	PollFloor = 250 * time.Millisecond
	// PollCapImage and PollCapVideo bound the wait between two checks of
	// a running job without webhooks: short jobs are looked at often,
	// long ones at most every 30 s.
	PollCapImage = 5 * time.Second
	PollCapVideo = 30 * time.Second
	// SafetyPollMin and SafetyPollMax bound the slow safety poll used when
	// webhooks are expected: the webhook is the signal, the poll only
	// catches a lost delivery.
	SafetyPollMin = 2 * time.Minute
	SafetyPollMax = 10 * time.Minute
)

// firstCheckFraction is how far into the expected duration the first
// real check lands (the runner's immediate look right after submit is not
// counted in it).
const firstCheckFraction = 0.5

// NextPoll says how long to wait before the next status check of a job.
//
//   - expected is the model's typical time from submit to completion
//     (Model.ExpectedDuration); zero means unknown (10 s is assumed).
//   - sinceSubmit is the time since the job was submitted.
//   - checks is the number of status checks made since submit, the
//     runner's immediate look after submit included.
//   - progressed reports that the last check showed progress (a higher
//     percentage, queued → running) compared with the check before it;
//     it resets the backoff to its base, so a job that visibly moves is
//     followed closely. The first observation is not progress.
//   - webhooks reports that a webhook will announce the job's end; only a
//     slow safety poll is then scheduled (2× expected, between 2 and 10
//     minutes).
//   - jitter spreads the result (see Jitter); nil means none.
//
// Without webhooks: wait until half the expected duration has passed
// (whatever the job showed before), then back off exponentially from expected/6, capped at PollCapImage for
// jobs expected under a minute, PollCapVideo for longer ones (linearly in
// between: expected/4). A 3-minute video is checked 4 to 5 times after the
// runner's immediate look.
func NextPoll(expected, sinceSubmit time.Duration, checks int, progressed, webhooks bool, jitter func(time.Duration) time.Duration) time.Duration {
	if expected <= 0 {
		expected = 10 * time.Second
	}
	if jitter == nil {
		jitter = func(d time.Duration) time.Duration { return d }
	}
	if webhooks {
		d := min(max(2*expected, SafetyPollMin), SafetyPollMax)
		return max(jitter(d), PollFloor)
	}
	limit := PollCap(expected)
	first := time.Duration(float64(expected) * firstCheckFraction)
	base := max(expected/6, PollFloor)
	if sinceSubmit < first-base/2 {
		// Nothing to gain by looking before then. (A check that jitter
		// put a little early does not wait for "first" again.)
		return max(jitter(first-sinceSubmit), PollFloor)
	}
	d := base
	if !progressed {
		// checks counts the immediate look and the first real check;
		// the backoff starts doubling after those.
		n := min(max(checks-2, 0), 16)
		d = base << n
	}
	d = min(d, limit)
	return min(max(jitter(d), PollFloor), limit+limit/4)
}

// PollCap is the longest wait between two checks of a running job without
// webhooks: expected/4, at least PollCapImage, at most PollCapVideo.
func PollCap(expected time.Duration) time.Duration {
	return min(max(expected/4, PollCapImage), PollCapVideo)
}

// Jitter returns a jitter function for NextPoll that moves a wait by up to
// ±frac of itself, uniformly (frac 0.1 = ±10 %).
func Jitter(frac float64) func(time.Duration) time.Duration {
	return func(d time.Duration) time.Duration {
		if d <= 0 || frac <= 0 {
			return d
		}
		span := float64(d) * frac
		return d + time.Duration((rand.Float64()*2-1)*span)
	}
}

// The elapsed-relative schedule (NextPollElapsed), issue 39's: without a
// webhook or a stream, a wait is at most ElapsedFraction of the time since
// submit, so a job is seen ended within about a tenth of its own length
// (at least ElapsedPollMin), not within a fixed 30 s.
const (
	ElapsedFraction = 0.1
	ElapsedPollMin  = time.Second
)

// NextPollElapsed says how long to wait before the next status check of
// a job, the runner's schedule since issue 39 (NextPoll is the one before
// it, kept for comparison):
//
//   - with webhooks, NextPoll's slow safety poll;
//   - the first real check at half the expected duration, as NextPoll;
//   - then every ElapsedFraction of the time since submit, at least
//     ElapsedPollMin and at most PollCap(expected) (30 s for the longest);
//   - a job whose last check showed progress p (0 < p < 1) is looked at
//     no later than the end p predicts (running·(1−p)/p), still at
//     least ElapsedPollMin apart;
//   - a job the vendor says has been running for running (>0; else the
//     time since submit stands for it) is looked at no later than the end
//     the model's expected duration predicts (its start plus expected),
//     and past that end every ElapsedFraction of its running time, not of
//     the time since submit: a job that queued long is followed as
//     closely as one that started at once.
//
// jitter spreads the result (the runner's is ±10 %). At the floor a job
// costs one request a second; Replicate allows 3,000 a minute for
// everything but creates, and Google's Gemini API limits requests per
// minute per model (its rate-limits page), which a 1 s floor per job keeps
// within reach of any tier for the handful of videos an owner runs at
// once (the in-flight cap).
func NextPollElapsed(expected, sinceSubmit, running time.Duration, progress float64, webhooks bool, jitter func(time.Duration) time.Duration) time.Duration {
	if expected <= 0 {
		expected = 10 * time.Second
	}
	if jitter == nil {
		jitter = func(d time.Duration) time.Duration { return d }
	}
	if webhooks {
		d := min(max(2*expected, SafetyPollMin), SafetyPollMax)
		return max(jitter(d), PollFloor)
	}
	first := time.Duration(float64(expected) * firstCheckFraction)
	if sinceSubmit < first-ElapsedPollMin/2 {
		return max(jitter(first-sinceSubmit), PollFloor)
	}
	limit := PollCap(expected)
	d := min(max(time.Duration(float64(sinceSubmit)*ElapsedFraction), ElapsedPollMin), limit)
	if running > 0 && running < sinceSubmit {
		if left := expected - running; left > 0 {
			d = min(d, max(left, ElapsedPollMin)) // land on the predicted end
		} else {
			d = min(d, max(time.Duration(float64(running)*ElapsedFraction), ElapsedPollMin))
		}
	} else {
		running = sinceSubmit
	}
	if progress > 0 && progress < 1 {
		left := time.Duration(float64(running) * (1 - progress) / progress)
		d = min(d, max(left, ElapsedPollMin))
	}
	return min(max(jitter(d), PollFloor), limit+limit/4)
}
