package admission

import "time"

// The latency verdict's rules (see latencyVerdict).
const (
	// lateShare is the share of settled transfers that may take longer
	// than MaxLatency before the flow counts as behind: half, so the bound
	// is on their median. A tail does not shed: one stalled partition's
	// late results (a quarter of them with four partitions), or a
	// replicated deployment whose p90 is already near the bound, would
	// keep the door nearly shut while the flow takes what it admits.
	lateShare = 0.5
	// minLateSample is the fewest settled transfers the latency verdict
	// is taken on: a refresh that saw fewer settle carries them into the
	// next one's sample, for up to Config.MaxLatency, and a sample that
	// stays smaller is dropped unjudged. One transfer is no median: the
	// first after a start takes the cold path (the relay's first produce,
	// the consumers' first fetch) and settles late, and a flow that
	// settles a trickle holds no queue that shedding would drain. The
	// outbox bound still sheds a stalled relay.
	minLateSample = 5
)

// latencyVerdict is whether the settled transfers are late: more than
// lateShare of a sample of at least minLateSample took longer than
// Config.MaxLatency from their POST to their result.
type latencyVerdict struct {
	// The sample being gathered: the transfers settled, late, and the
	// oldest's age, counted since the refresh at began it.
	settled, late int
	worst         time.Duration
	at            time.Time
	// lateNow is the last verdict, taken at takenAt.
	lateNow bool
	takenAt time.Time
}

// judge adds a refresh's settled transfers (settled, late of them, the
// oldest's age worst) to the sample and returns the verdict, and the
// oldest age it was taken on (worst itself when it was carried).
//
// The verdict is taken once the sample holds minLateSample; a sample
// older than maxLatency is dropped unjudged. A refresh that completes no
// sample carries the last verdict, for up to maxLatency after it was
// taken: the projection settles in batches, and no news is not good news
// (the transfers behind a late batch are older still at the next). Not
// longer: a projection whose partitions moved to another instance
// settles nothing from then on, and a verdict it kept would hold the door
// where it was for good. maxLatency 0 is never late.
func (v *latencyVerdict) judge(now time.Time, settled, late int, worst, maxLatency time.Duration) (bool, time.Duration) {
	v.lateNow = v.lateNow && now.Sub(v.takenAt) <= maxLatency
	if settled > 0 && v.settled == 0 {
		v.at = now
	}
	v.settled, v.late, v.worst = v.settled+settled, v.late+late, max(v.worst, worst)
	switch {
	case v.settled >= minLateSample:
		v.lateNow = maxLatency > 0 && float64(v.late) > lateShare*float64(v.settled)
		v.takenAt, worst = now, v.worst
		v.settled, v.late, v.worst = 0, 0, 0
	case v.settled > 0 && now.Sub(v.at) >= maxLatency:
		v.settled, v.late, v.worst = 0, 0, 0
	}
	return v.lateNow, worst
}
