package history

import (
	"slices"
	"time"
)

// KindUnfenced is a window in which a former primary ran unfenced: the
// harness resumed a hung primary after its standby was promoted, and
// fenced it only later (Unfenced).
const KindUnfenced Kind = "unfenced"

// Unfenced is what an unfenced window (from the Op's Invoke, the old
// primary resumed, to its Complete, the fencing done) is about: the fault
// that made it and the databases of the pair. In it a connection the old
// primary held, or a new one that lands on it, answers from the old
// primary, which lacks what the new one committed since the promotion.
type Unfenced struct {
	Fault     string   `json:"fault"`
	Databases []string `json:"databases"`
}

// readsDatabase is the database that answers the transfers API, whose
// answers are checkReads' observations: GET /transferencias/{id}, the
// POSTs, the commands.
const readsDatabase = "transfers"

// ExplainedStaleRead is a stale read allowed because it may have been
// answered by a former primary of its database while it ran unfenced.
type ExplainedStaleRead struct {
	Key   string
	Fault string
}

// Unfenced records that a former primary ran unfenced from from (it
// resumed) to to (its fencing returned).
func (r *Recorder) Unfenced(from, to time.Time, u Unfenced) {
	r.Record(Op{Kind: KindUnfenced, Invoke: from, Complete: to, Outcome: Info, Unfenced: &u})
}

// unfencedOn returns the unfenced windows of database db.
func unfencedOn(h History, db string) []Op {
	var out []Op
	for _, op := range h {
		if op.Kind == KindUnfenced && slices.Contains(op.Unfenced.Databases, db) {
			out = append(out, op)
		}
	}
	return out
}

// unfencedDuring returns the fault of the first window in ws that the
// observation's interval overlaps (its answer may have come from the
// unfenced former primary), or "".
func unfencedDuring(ws []Op, o observation) string {
	for _, w := range ws {
		if !o.invoke.After(w.Complete) && !o.complete.Before(w.Invoke) {
			return w.Unfenced.Fault
		}
	}
	return ""
}
