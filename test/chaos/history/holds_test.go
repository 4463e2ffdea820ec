package history

import (
	"cmp"
	"net/http"
	"time"

	"github.com/paysuite/payments/pkg/events"
)

const (
	topicRes = "pagamentos.transferencia.reservada.v1"
	topicCan = "pagamentos.transferencia.cancelada.v1"
)

// holdCase is one hold of a hand-made history: its request and how it
// ends.
type holdCase struct {
	id     string
	body   Transfer
	ending string // StatusSettled, StatusCancelled or StatusExpired
	// capture is what the capture asks (0: all of it) for a hold that ends
	// LIQUIDADA, and what the racing capture asked of one that expired
	// first when race is set.
	capture  int64
	captured int64 // what a LIQUIDADA hold captured
	race     bool
	// commandAt is when its capture or cancellation was sent (default 26).
	commandAt float64
}

// hold returns a hold body of cents from one account to the other
// that expires s seconds after t0 (never if s is 0: the default).
func hold(from, to string, cents int64, s float64) Transfer {
	b := Transfer{From: from, To: to, AmountCents: cents, Currency: "BRL", Capture: CaptureManual}
	if s > 0 {
		b.ExpiresAt = at(s).Format(time.RFC3339)
	}
	return b
}

// holdCases are the holds of cleanHolds: captured in part, cancelled,
// expired, a capture the expiry beat, a capture of all that beat the
// expiry.
func holdCases() []holdCase {
	return []holdCase{
		{id: "h1", body: hold("A1", "A2", 300, 0), ending: StatusSettled, capture: 120, captured: 120},
		{id: "h2", body: hold("A2", "A1", 200, 0), ending: StatusCancelled},
		{id: "h3", body: hold("A1", "A2", 50, 30), ending: StatusExpired},
		{id: "h4", body: hold("A2", "A1", 40, 31), ending: StatusExpired, race: true},
		{id: "h5", body: hold("A1", "A2", 30, 32), ending: StatusSettled, captured: 30, commandAt: 31.9},
	}
}

// cleanHolds is clean() and, after its last snapshot, the holds of cases:
// each POSTed at 23, read RESERVADA at 24, in a snapshot at 25 as open
// reservations, commanded at 26 (a racing capture at 30.5), read at its
// ending at 35 and released in the last snapshot, at 37; the ledger's
// results published and consumed. It also holds a capture refused 409
// after each expiry and, with h1 first, a cancellation refused while h1's
// capture was in flight and that capture's replay after it was applied.
func cleanHolds(cases ...holdCase) History {
	h := clean()
	const fund, a1, a2 = -2000, 839, 1161 // clean()'s last snapshot
	bal := map[string]int64{"A1": a1, "A2": a2}
	reserved := map[string]int64{}
	var open, released []Hold
	var entries []Entry
	seq, offset := int64(3), map[string]int64{}
	publish := func(typ, topic, id string, key string, cents int64, reason string) {
		part := map[string]int{"A1": 0, "A2": 1}[key]
		ev := "ev-" + typ + "-" + id
		p := published("ledger", seq, topic, part, key, ev, typ, id)
		p.Record.AmountCents, p.Record.Reason = cents, reason
		seq++
		h = append(h, p)
		for _, g := range []string{"notificacoes", "transferencias-projecao"} {
			s := g + topic + key
			h = append(h, consumed(g, topic, part, 10+offset[s], key, ev))
			offset[s]++
		}
	}
	for _, c := range cases {
		b := c.body
		sent := cmp.Or(c.commandAt, 26)
		h = append(h, post(23, 23.1, OK, c.id, b, accepted(c.id)), holdRead(24, c.id, b, StatusReserved, 0))
		publish(TypeReserved, topicRes, c.id, b.From, b.AmountCents, "")
		reserved[b.From] += b.AmountCents
		open = append(open, Hold{TransferID: c.id, Account: b.From, AmountCents: b.AmountCents, State: StatusReserved})
		row := Hold{TransferID: c.id, Account: b.From, AmountCents: b.AmountCents, State: c.ending}
		switch c.ending {
		case StatusSettled:
			h = append(h, command(KindCapture, sent, OK, "c-"+c.id, c.id, c.capture, http.StatusAccepted))
			publish(events.TypeSettled, topicSet, c.id, b.From, c.captured, "")
			row.CapturedCents = c.captured
			bal[b.From] -= c.captured
			bal[b.To] += c.captured
			entries = append(entries, Entry{Type: EntryTransfer, ID: c.id, Debit: b.From, DebitCents: c.captured, Credit: b.To, CreditCents: c.captured})
		case StatusCancelled:
			h = append(h, command(KindCancel, sent, OK, "x-"+c.id, c.id, 0, http.StatusAccepted))
			publish(TypeCancelled, topicCan, c.id, b.From, 0, ReasonByClient)
		case StatusExpired:
			if c.race {
				h = append(h, command(KindCapture, 30.5, OK, "c-"+c.id, c.id, c.capture, http.StatusAccepted))
			}
			publish(TypeCancelled, topicCan, c.id, b.From, 0, ReasonExpired)
			h = append(h, command(KindCapture, 36, OK, "late-"+c.id, c.id, 0, http.StatusConflict))
		}
		released = append(released, row)
		h = append(h, holdRead(35, c.id, b, c.ending, row.CapturedCents))
	}
	if len(cases) > 0 && cases[0].id == "h1" {
		h = append(h,
			command(KindCapture, 36, OK, "c-h1", "h1", 120, http.StatusAccepted),   // a replay, after the capture
			command(KindCancel, 26.05, Fail, "x-h1", "h1", 0, http.StatusConflict)) // while the capture was in flight
	}
	first := balances(fund, a1, a2)
	for i := range first {
		first[i].ReservedCents = reserved[first[i].Account]
	}
	s1 := snapshot(25, 25.1, 0, 0, 0, "k1", "k2", "k4", "k5")
	s1.Snapshot.Balances, s1.Snapshot.Holds = first, open
	s2 := snapshot(37, 37.1, fund, bal["A1"], bal["A2"], "k1", "k2", "k4", "k5")
	s2.Snapshot.Entries = append(s2.Snapshot.Entries, entries...)
	s2.Snapshot.Holds = released
	return append(h, s1, s2)
}

// holdRead is a read of hold id answering its body, in status st, having
// captured settled.
func holdRead(s float64, id string, b Transfer, st string, settled int64) Op {
	return Op{Kind: KindGet, Invoke: at(s), Complete: at(s + 0.1), Outcome: OK, Key: id,
		Answer: &Answer{Status: http.StatusOK, ID: id, TransferStatus: st, Transfer: &b, SettledCents: settled}}
}

// command is a capture or cancellation of transfer id under key asking
// cents, answered status (a 202 says RESERVADA).
func command(kind Kind, s float64, outcome Outcome, key, id string, cents int64, status int) Op {
	a := &Answer{Status: status, ID: id}
	switch status {
	case http.StatusAccepted:
		a.TransferStatus = StatusReserved
	}
	return Op{Kind: kind, Invoke: at(s), Complete: at(s + 0.1), Outcome: outcome, Key: key,
		Command: &Command{TransferID: id, AmountCents: cents}, Answer: a}
}
