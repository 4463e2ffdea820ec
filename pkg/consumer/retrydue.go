package consumer

import (
	"fmt"
	"time"

	"github.com/paysuite/payments/pkg/broker"
)

// MaxDueSkew is how far past the policy's largest delay a retry record's due
// time (retry_topic-backoff-timestamp) may lie. The loop that wrote it set
// it to its clock plus one of the policy's delays; beyond that plus this
// margin (clock skew between instances), the time is skewed or forged, and
// sleeping until it would stall the retry partition: the record goes to
// the DLT instead, as a poison record.
const MaxDueSkew = 30 * time.Second

// dueTooFar returns a Permanent error when m's due time lies further ahead
// than the policy allows, nil otherwise.
func (l *loop) dueTooFar(m broker.Record, due time.Time) error {
	rt, ok := l.cfg.Policy.(RetryTopics)
	if !ok || due.IsZero() {
		return nil
	}
	var largest time.Duration
	for _, d := range rt.Delays {
		largest = max(largest, d)
	}
	if ahead := due.Sub(l.cfg.Now()); ahead > largest+MaxDueSkew {
		return Permanent(fmt.Errorf("retry due time %s is %v ahead, more than the largest retry delay %v plus %v",
			due.UTC().Format(time.RFC3339Nano), ahead.Round(time.Millisecond), largest, MaxDueSkew))
	}
	return nil
}
