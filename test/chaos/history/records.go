package history

import (
	"fmt"
	"sort"
)

// checkRecords finds published records a consumer group of their topic
// never consumed, and accounts whose Ordered events of one topic (from one
// outbox) a group consumed out of outbox order. The groups of a topic are
// those the history names as its subscribers (KindSubscribed) and those
// it shows consuming it; a record on a topic that has neither was
// consumed by nobody, and is lost too (a renamed group turns no check
// off). A record consumed again (a producer's retry, a redelivery) is
// fine: order is judged on each event's first consumption. Consumed
// records no relay published (written by the test itself, say) are not
// judged.
func checkRecords(h History) []Anomaly {
	published := map[string]Record{} // event id -> its record
	var pubOrder []string
	type stream struct{ group, topic string }
	consumed := map[stream][]Record{}
	groups := map[string]map[string]bool{} // topic -> groups
	for _, op := range h {
		switch op.Kind {
		case KindPublished:
			if _, ok := published[op.Record.EventID]; !ok {
				published[op.Record.EventID] = *op.Record
				pubOrder = append(pubOrder, op.Record.EventID)
			}
		case KindConsumed:
			r := *op.Record
			consumed[stream{r.Group, r.Topic}] = append(consumed[stream{r.Group, r.Topic}], r)
			if groups[r.Topic] == nil {
				groups[r.Topic] = map[string]bool{}
			}
			groups[r.Topic][r.Group] = true
		case KindSubscribed:
			if groups[op.Record.Topic] == nil {
				groups[op.Record.Topic] = map[string]bool{}
			}
			groups[op.Record.Topic][op.Record.Group] = true
		}
	}
	var out []Anomaly
	got := map[stream]map[string]bool{}
	for s, recs := range consumed {
		got[s] = make(map[string]bool, len(recs))
		for _, r := range recs {
			got[s][r.EventID] = true
		}
	}
	for _, id := range pubOrder {
		p := published[id]
		if len(groups[p.Topic]) == 0 {
			out = append(out, Anomaly{LostRecord, id, fmt.Sprintf("%s published by %s (seq %d, key %s), a topic no consumer group consumed",
				p.Topic, p.Source, p.Seq, p.Key)})
			continue
		}
		for _, g := range sortedKeys(groups[p.Topic]) {
			if !got[stream{g, p.Topic}][id] {
				out = append(out, Anomaly{LostRecord, id, fmt.Sprintf("%s published by %s (seq %d, key %s), never consumed by %s",
					p.Topic, p.Source, p.Seq, p.Key, g)})
			}
		}
	}

	streams := make([]stream, 0, len(consumed))
	for s := range consumed {
		streams = append(streams, s)
	}
	sort.Slice(streams, func(i, j int) bool {
		if streams[i].group != streams[j].group {
			return streams[i].group < streams[j].group
		}
		return streams[i].topic < streams[j].topic
	})
	for _, s := range streams {
		recs := consumed[s]
		sort.SliceStable(recs, func(i, j int) bool {
			if recs[i].Partition != recs[j].Partition {
				return recs[i].Partition < recs[j].Partition
			}
			return recs[i].Offset < recs[j].Offset
		})
		type account struct {
			partition   int
			key, source string
		}
		last := map[account]Record{} // the last first-consumed event of each account
		first := map[string]bool{}
		reported := map[account]bool{}
		for _, r := range recs {
			p, ok := published[r.EventID]
			if !ok || !p.Ordered || first[r.EventID] {
				continue
			}
			first[r.EventID] = true
			a := account{r.Partition, p.Key, p.Source}
			if prev, ok := last[a]; ok && p.Seq < prev.Seq && !reported[a] {
				reported[a] = true
				out = append(out, Anomaly{OutOfOrder, s.group + " " + s.topic + " " + p.Key,
					fmt.Sprintf("event %s (seq %d) consumed at offset %d after %s (seq %d) at offset %d",
						r.EventID, p.Seq, r.Offset, prev.EventID, prev.Seq, prev.Offset)})
			}
			if prev, ok := last[a]; !ok || p.Seq > prev.Seq {
				rr := r
				rr.Seq = p.Seq
				last[a] = rr
			}
		}
	}
	return out
}
