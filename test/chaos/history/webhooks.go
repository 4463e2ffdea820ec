package history

import (
	"fmt"
	"sort"
	"time"
)

// A crash explains a second delivery of an event when the first delivery
// came at most crashBefore before it began (the sender records a delivery
// after its send returns, and a batch of sends can take a few seconds) or
// while it lasted, give or take crashAfter, and the second came after it
// began.
const (
	crashBefore = 15 * time.Second
	crashAfter  = time.Second
)

// checkWebhooks finds event ids delivered more than once with no crash
// that interrupts the sender to explain it, and names the crash that
// explains each allowed duplicate.
func checkWebhooks(h History) ([]Anomaly, []ExplainedDuplicate) {
	deliveries := map[string][]time.Time{}
	var crashes []Op
	for _, op := range h {
		switch op.Kind {
		case KindWebhook:
			deliveries[op.Webhook.EventID] = append(deliveries[op.Webhook.EventID], op.Invoke)
		case KindCrash:
			if op.Crash.InterruptsWebhooks {
				crashes = append(crashes, op)
			}
		}
	}
	sort.SliceStable(crashes, func(i, j int) bool { return crashes[i].Invoke.Before(crashes[j].Invoke) })
	var out []Anomaly
	var explained []ExplainedDuplicate
	for _, id := range sortedKeys(deliveries) {
		ts := deliveries[id]
		if len(ts) < 2 {
			continue
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		first := ts[0]
		for _, again := range ts[1:] {
			var by *Op
			for i, c := range crashes {
				if !first.Before(c.Invoke.Add(-crashBefore)) && !first.After(c.Complete.Add(crashAfter)) && again.After(c.Invoke) {
					by = &crashes[i]
					break
				}
			}
			if by == nil {
				out = append(out, Anomaly{DuplicateWebhook, id, fmt.Sprintf("delivered at %s and again at %s, no crash between",
					first.UTC().Format(time.RFC3339Nano), again.UTC().Format(time.RFC3339Nano))})
				continue
			}
			explained = append(explained, ExplainedDuplicate{EventID: id, Crash: by.Crash.Name})
		}
	}
	return out, explained
}
