package history

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/events"
)

// The transfer statuses of GET /transferencias/{id} (CONTRACTS sections 1
// and 9).
const (
	StatusPending   = "PENDENTE"
	StatusSettled   = "LIQUIDADA"
	StatusRejected  = "REJEITADA"
	StatusReserved  = "RESERVADA"
	StatusCancelled = "CANCELADA"
	StatusExpired   = "EXPIRADA"
)

// The ranks of what a client can learn of a transfer, each known to hold
// for good once seen: it existed, was reserved, was terminal.
const (
	rankAbsent   = iota // 404
	rankExists          // a 202, or PENDENTE
	rankReserved        // RESERVADA, or a command's 202
	rankTerminal        // with its status
)

// observation is one thing a client learnt about a transfer, as its rank
// and status.
type observation struct {
	invoke, complete time.Time
	rank             int
	status           string // the terminal status, or what was read
	what             string
	// answer: a 202, which says the transfer exists and nothing of its
	// status (a replay repeats the first answer, PENDENTE, whatever the
	// transfer's status now), so it contradicts no earlier read.
	answer bool
}

func terminal(status string) bool {
	switch status {
	case StatusSettled, StatusRejected, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// checkReads finds accepted transfers never seen terminal, transfers seen
// with two terminal statuses (by reads, result events, or postings, which
// are a settlement; a hold's by reads only, the ledger's side of a hold is
// holds.go's), and reads that contradict an earlier one in real time (the
// earlier completed before the later was invoked). A contradicting read
// that overlapped an unfenced window of the transfers database may have
// been answered by the former primary: it is explained, not reported.
func checkReads(h History) ([]Anomaly, []ExplainedStaleRead) {
	obs := map[string][]observation{}
	accepted := map[string]bool{}
	holds := holdIDs(h)
	results := map[string]map[string]bool{} // transfer id -> terminal statuses of its results and postings
	for _, op := range h {
		switch {
		case accepted202(op):
			accepted[op.Key] = true
			obs[op.Key] = append(obs[op.Key], observation{op.Invoke, op.Complete, rankExists, "", "202", true})
		case commandAccepted(op):
			// A command's 202 (or its replay) was answered while the transfer
			// was reserved.
			obs[op.Command.TransferID] = append(obs[op.Command.TransferID],
				observation{op.Invoke, op.Complete, rankReserved, "", string(op.Kind) + " 202", true})
		case op.Kind == KindGet && op.Outcome == OK:
			o := observation{invoke: op.Invoke, complete: op.Complete, status: op.Answer.TransferStatus}
			switch {
			case op.Answer.Status == http.StatusNotFound:
				o.rank, o.what = rankAbsent, "404"
			case op.Answer.Status == http.StatusOK && terminal(o.status):
				o.rank, o.what = rankTerminal, o.status
			case op.Answer.Status == http.StatusOK && o.status == StatusReserved:
				o.rank, o.what = rankReserved, o.status
			case op.Answer.Status == http.StatusOK:
				o.rank, o.what = rankExists, o.status
			default:
				continue // a refusal (401, 400) says nothing of the transfer
			}
			obs[op.Key] = append(obs[op.Key], o)
		case op.Kind == KindSnapshot:
			// Postings are the ledger's settlement: the transfer is LIQUIDADA.
			for _, id := range op.Snapshot.TransferIDs() {
				if holds[id] {
					continue
				}
				if results[id] == nil {
					results[id] = map[string]bool{}
				}
				results[id][StatusSettled] = true
			}
		case op.Kind == KindPublished:
			st := ""
			switch op.Record.EventType {
			case events.TypeSettled:
				st = StatusSettled
			case events.TypeRejected:
				st = StatusRejected
			}
			if st != "" && op.Record.TransferID != "" && !holds[op.Record.TransferID] {
				if results[op.Record.TransferID] == nil {
					results[op.Record.TransferID] = map[string]bool{}
				}
				results[op.Record.TransferID][st] = true
			}
		}
	}
	var out []Anomaly
	var explained []ExplainedStaleRead
	unfenced := unfencedOn(h, readsDatabase)
	excused := func(b observation) bool { return unfencedDuring(unfenced, b) != "" }
	ids := make([]string, 0, len(obs))
	for id := range obs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		list := obs[id]
		sortObservations(list)
		seen := map[string]bool{}
		for st := range results[id] {
			seen[st] = true
		}
		read := false // a client read it terminal: postings or events alone are not an answer
		for _, o := range list {
			if o.rank == rankTerminal {
				seen[o.status], read = true, true
			}
		}
		if accepted[id] && !read {
			out = append(out, Anomaly{NotTerminal, id, fmt.Sprintf("answered 202, never read terminal (%d observations)", len(list))})
		}
		if st := sortedKeys(seen); len(st) > 1 {
			out = append(out, Anomaly{TwoTerminal, id, "seen " + strings.Join(st, " and ")})
		}
		if a, b, ok := contradictionExcept(list, excused); ok {
			out = append(out, Anomaly{StaleRead, id, fmt.Sprintf("%s (done %s) then %s (from %s)",
				a.what, a.complete.Format(time.RFC3339Nano), b.what, b.invoke.Format(time.RFC3339Nano))})
		} else if _, b, ok := contradiction(list); ok {
			explained = append(explained, ExplainedStaleRead{Key: id, Fault: unfencedDuring(unfenced, b)})
		}
	}
	return out, explained
}

// sortObservations sorts list by the time each was invoked.
func sortObservations(list []observation) {
	sort.Slice(list, func(i, j int) bool { return list[i].invoke.Before(list[j].invoke) })
}

// contradiction returns the first pair of observations, a completed
// before b was invoked, where b (a read) knows less than a or names
// another terminal status.
func contradiction(list []observation) (observation, observation, bool) {
	return contradictionExcept(list, nil)
}

// contradictionExcept is contradiction passing over each read b that skip
// (when not nil) excuses.
func contradictionExcept(list []observation, skip func(observation) bool) (observation, observation, bool) {
	for _, b := range list {
		if b.answer || (skip != nil && skip(b)) {
			continue
		}
		for _, a := range list {
			if !a.complete.Before(b.invoke) {
				continue
			}
			if b.rank < a.rank || (a.rank == rankTerminal && b.rank == rankTerminal && a.status != b.status) {
				return a, b, true
			}
		}
	}
	return observation{}, observation{}, false
}
