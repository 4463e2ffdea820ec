package history

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// registerTimeout bounds porcupine's search per key; one key has a few
// operations, so it decides in microseconds unless something is off.
const registerTimeout = 10 * time.Second

// regInput is a POST of one key: its body and whether its outcome is
// unknown.
type regInput struct {
	key     string
	body    Transfer
	unknown bool
}

// regOutput is what a POST with a known outcome was told.
type regOutput struct {
	accepted bool   // 202: the transfer id and the status in its body
	id       string //
	status   string //
	reused   bool   // 422 idempotency-key-reused: the key holds another body
	refused  bool   // another final 4xx (validation): nothing written
}

// regState is the key's register: empty, or the body that won and the
// transfer it created.
type regState struct {
	set  bool
	body Transfer
	id   string
}

// keyModel is the Idempotency-Key of CONTRACTS section 1 as a register:
// the first accepted body creates the transfer whose id is the key; a
// replay with the same body gets that first answer again (202, PENDENTE);
// another body gets 422. A POST of unknown outcome may have created it or not.
var keyModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		st, in := state.(regState), input.(regInput)
		if in.unknown {
			if st.set {
				return []any{st}
			}
			return []any{st, regState{set: true, body: in.body, id: in.key}}
		}
		out := output.(regOutput)
		if out.accepted && out.status != StatusPending {
			return nil // a replay is the first answer again, which said PENDENTE
		}
		switch {
		case out.accepted && !st.set && out.id == in.key:
			return []any{regState{set: true, body: in.body, id: out.id}}
		case out.accepted && st.set && st.body == in.body && st.id == out.id:
			return []any{st}
		case out.reused && st.set && st.body != in.body:
			return []any{st}
		case out.refused:
			return []any{st}
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.unknown {
			return fmt.Sprintf("POST %+v -> unknown", in.body)
		}
		return fmt.Sprintf("POST %+v -> %+v", in.body, output)
	},
}

// checkRegisters runs porcupine on the POSTs of each key. Fail outcomes
// changed nothing and are left out; Info ones never return (Jepsen's and
// porcupine's way: their return time is infinite).
func checkRegisters(h History) (anomalies []Anomaly, undecided []string) {
	byKey := map[string][]porcupine.Operation{}
	origin := h.origin()
	reusedType := httpapi.TypeURI(errkind.KeyReused)
	for i, op := range h {
		if op.Kind != KindPost || op.Outcome == Fail {
			continue
		}
		in := regInput{key: op.Key, body: *op.Transfer, unknown: op.Outcome == Info}
		p := porcupine.Operation{ClientId: i, Input: in, Call: op.Invoke.Sub(origin).Nanoseconds()}
		if in.unknown {
			p.Return = math.MaxInt64
			p.Output = regOutput{}
		} else {
			a := op.Answer
			p.Return = op.Complete.Sub(origin).Nanoseconds()
			p.Output = regOutput{
				accepted: a.Status == http.StatusAccepted, id: a.ID, status: a.TransferStatus,
				reused:  a.Status == http.StatusUnprocessableEntity && a.Problem == reusedType,
				refused: a.Status >= 400 && a.Status < 500 && a.Problem != reusedType,
			}
		}
		byKey[op.Key] = append(byKey[op.Key], p)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := keyModel.ToModel()
	for _, k := range keys {
		ops := byKey[k]
		for i := range ops {
			ops[i].ClientId = i // porcupine's visualisation wants them dense
		}
		switch porcupine.CheckOperationsTimeout(model, ops, registerTimeout) {
		case porcupine.Illegal:
			anomalies = append(anomalies, Anomaly{Idempotency, k, describe(ops)})
		case porcupine.Unknown:
			undecided = append(undecided, k)
		}
	}
	return anomalies, undecided
}

func describe(ops []porcupine.Operation) string {
	s := ""
	for i, op := range ops {
		if i > 0 {
			s += "; "
		}
		in := op.Input.(regInput)
		if in.unknown {
			s += fmt.Sprintf("%d %s..: unknown", in.body.AmountCents, in.body.From)
			continue
		}
		s += fmt.Sprintf("%d %s..: %+v", in.body.AmountCents, in.body.From, op.Output)
	}
	return s
}

// origin is the earliest time in the history, porcupine's zero.
func (h History) origin() time.Time {
	var t time.Time
	for _, op := range h {
		if t.IsZero() || op.Invoke.Before(t) {
			t = op.Invoke
		}
	}
	return t
}
