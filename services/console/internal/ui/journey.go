package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/opsapi"
)

// Step states, also the CSS class of a step.
const (
	stateDone    = "done"
	stateWaiting = "waiting"
	stateStuck   = "stuck"
	stateUnknown = "unknown"
	stateSkipped = "skipped"
)

// Step is one step of a transfer's journey.
type Step struct {
	Title   string
	Service string
	At      time.Time // zero when the step has not happened
	State   string
	// Lines are the step's facts; Note says in words why it waits.
	Lines []string
	Note  string
	// Postings of a ledger step.
	Postings []PostingLine
	// Requeue, when set, is a DEAD outbox event an operator can requeue.
	Requeue *RequeueTarget
	// Attempts of a notification step, oldest first.
	Attempts []AttemptLine
}

// AttemptLine is one attempt to notify: its channel, the topic its record
// was read from (Retry when that is a retry topic) and its outcome.
type AttemptLine struct {
	N                              int
	Channel, Topic, Outcome, Error string
	Retry                          bool
	At                             time.Time
}

// PostingLine is one posting with the account's balance after it.
type PostingLine struct {
	Account, Side, Amount, BalanceAfter string
}

// RequeueTarget names a DEAD event and its service.
type RequeueTarget struct {
	Service, EventID string
}

// Journey is a transfer's path through the four services.
type Journey struct {
	ID       string
	Transfer *opsapi.OperatorTransfer
	Steps    []Step
	// EndToEnd is the time from acceptance to the projected status, when
	// both happened.
	EndToEnd string
	// TraceID is the W3C trace id of the request, when it was traced.
	TraceID string
	// ExpiresAt is when a hold's reservation expires (its expiraEm); zero
	// for an immediate transfer.
	ExpiresAt time.Time
	// Refunds are the transfer's refunds, oldest first (journey_refunds.go).
	Refunds []RefundLine
	Marks   []Mark
}

// Mark is a step's dot on the drawn timeline: X in 0..1000 of the SVG.
type Mark struct {
	X     int
	Label string
	State string
}

// journeyParts are the services' answers for one transfer; a nil part was
// not found (or its service is down: see down).
type journeyParts struct {
	transfer                                  *opsapi.OperatorTransfer
	refunds                                   *opsapi.Refunds
	decision                                  *opsDecision
	settlement                                *opsapi.Settlement
	notifications                             *opsNotifications
	transfersOut, antifraudOut, ledgerOut     *opsapi.Events
	transfersLog, antifraudLog, ledgerBacklog *opsapi.Backlog
	down                                      map[string]bool
}

// target), or unknown.
func outboxStep(st *Step, service string, evs *opsapi.Events, backlog *opsapi.Backlog, now time.Time, types ...string) {
	if evs == nil {
		return
	}
	var ev *opsapi.Event
	for i := range evs.Eventos {
		for _, t := range types {
			if evs.Eventos[i].Tipo == t {
				ev = &evs.Eventos[i]
			}
		}
	}
	if ev == nil {
		return
	}
	switch ev.Status {
	case "PUBLISHED":
		at := parseTime(ev.PublicadoEm)
		// published_at is when the relay recorded the broker's ack: a
		// fast consumer may have read the record a moment before.
		st.Lines = append(st.Lines, fmt.Sprintf("%s published to %s (acknowledged at %s)", ev.Tipo, ev.Topico, clock(at)))
		if st.At.IsZero() {
			st.At = at
		}
	case "DEAD":
		st.State = stateStuck
		st.Note = fmt.Sprintf("DEAD in %s outbox after %d attempts: %s. Requeue it once the cause is fixed.",
			possessive(service), ev.Tentativas, ev.Erro)
		st.Requeue = &RequeueTarget{Service: service, EventID: ev.ID}
	case "DISCARDED":
		st.State = stateStuck
		st.Note = fmt.Sprintf("discarded by an operator from %s outbox: it will never be published", possessive(service))
	default:
		st.State = stateWaiting
		waited := humanDuration(now.Sub(parseTime(ev.EnfileiradoEm)))
		note := fmt.Sprintf("waiting in %s outbox for %s", possessive(service), waited)
		if held := heldBackBy(backlog, ev); held != nil {
			note += fmt.Sprintf(": the key %s has an older event held back (DEAD: %s)", ev.Chave, held.Erro)
		} else if ev.Tentativas > 0 {
			note += fmt.Sprintf(", after %d failed attempts: %s", ev.Tentativas, ev.Erro)
		}
		st.Note = note
	}
}

// heldBackBy returns the DEAD event of the backlog that holds ev's key
// back, if any.
func heldBackBy(b *opsapi.Backlog, ev *opsapi.Event) *opsapi.DeadEvent {
	if b == nil {
		return nil
	}
	for i, d := range b.EventosMortos {
		if d.Chave == ev.Chave && d.Topico == ev.Topico && d.ID != ev.ID {
			return &b.EventosMortos[i]
		}
	}
	return nil
}

// buildJourney turns the services' answers into the steps of the page.
func buildJourney(id string, p journeyParts, now time.Time) Journey {
	j := Journey{ID: id, Transfer: p.transfer}
	downNote := func(st *Step) bool {
		if p.down[st.Service] {
			st.State = stateUnknown
			st.Note = st.Service + " is unavailable: this step cannot be shown now"
			return true
		}
		return false
	}

	accepted := Step{Title: "Request accepted", Service: "transfers", State: stateDone}
	published := Step{Title: "Published to Kafka", Service: "transfers", State: stateWaiting}
	if !downNote(&accepted) {
		t := p.transfer
		accepted.At = parseTime(t.CriadaEm)
		accepted.Lines = []string{
			"client " + t.ClienteID + requestIDPart(t.RequestID),
			fmt.Sprintf("%s from %s to %s", money(t.ValorEmCentavos, t.Moeda), t.ContaOrigem, t.ContaDestino),
			"idempotency key " + t.ID,
		}
		outboxStep(&published, "transfers", p.transfersOut, p.transfersLog, now, "TransferenciaSolicitada")
		if published.At.IsZero() && published.Note == "" {
			// Published long ago and cleaned after the outbox retention, or
			// already decided downstream: the next steps say more.
			published.State = stateUnknown
			published.Note = "no outbox row left (published events are deleted after the retention period)"
		} else if !published.At.IsZero() {
			published.State = stateDone
		}
	} else {
		published.State, published.Note = stateUnknown, accepted.Note
	}

	decision := Step{Title: "Antifraud decision", Service: "antifraud"}
	blocked := false
	if !downNote(&decision) {
		if d := p.decision; d != nil {
			decision.State = stateDone
			decision.At = parseTime(d.DecididaEm)
			rules := "no rule fired"
			if len(d.Regras) > 0 {
				rules = "rules fired: " + strings.Join(d.Regras, ", ")
			}
			decision.Lines = []string{fmt.Sprintf("%s, score %d (threshold %d)", d.Resultado, d.Pontuacao, d.Limiar), rules}
			blocked = d.Resultado == "BLOCKED"
			outboxStep(&decision, "antifraud", p.antifraudOut, p.antifraudLog, now,
				"TransferenciaAnalisada", "TransferenciaRejeitada")
		} else if !published.At.IsZero() {
			decision.State = stateWaiting
			decision.Note = fmt.Sprintf("waiting for antifraud for %s since the request was published (see its consumer lag in Backlogs)",
				humanDuration(now.Sub(published.At)))
		} else {
			decision.State = stateWaiting
			decision.Note = "not reached yet"
		}
	}

	ledger := Step{Title: "Ledger settlement", Service: "ledger"}
	if !downNote(&ledger) {
		switch s := p.settlement; {
		case s != nil:
			ledger.State = stateDone
			ledger.At = parseTime(s.ProcessadaEm)
			cur := ""
			if p.transfer != nil {
				cur = p.transfer.Moeda
			}
			switch s.Resultado {
			case "RESERVADA":
				reservedStep(&ledger, p, now)
			case "REJEITADA":
				ledger.Title = "Ledger rejection"
				ledger.Lines = []string{"rejected: " + s.Motivo}
			default:
				ledger.Lines = []string{s.Resultado}
				ledger.Postings = postingLines(s.Lancamentos, cur)
			}
			if s.Resultado != "RESERVADA" {
				outboxStep(&ledger, "ledger", p.ledgerOut, p.ledgerBacklog, now,
					"TransferenciaLiquidada", "TransferenciaRejeitada")
			}
		case blocked:
			ledger.State = stateSkipped
			ledger.Note = "not sent to the ledger: antifraud blocked the transfer"
		case p.decision != nil && decision.State == stateDone:
			ledger.State = stateWaiting
			ledger.Note = fmt.Sprintf("waiting for the ledger for %s since antifraud decided", humanDuration(now.Sub(decision.At)))
		default:
			ledger.State = stateWaiting
			ledger.Note = "not reached yet"
		}
	}

	projected := Step{Title: "Status projected", Service: "transfers"}
	if !downNote(&projected) {
		t := p.transfer
		if t.Status != "PENDENTE" {
			projected.State = stateDone
			projected.At = parseTime(t.AtualizadaEm)
			line := "status " + t.Status
			if t.Motivo != "" {
				line += ": " + t.Motivo
			}
			projected.Lines = []string{line}
		} else {
			projected.State = stateWaiting
			projected.Note = "status PENDENTE: waiting for the result of antifraud and the ledger"
		}
	}

	j.Steps = []Step{accepted, published, decision, ledger}
	if isHold(p) {
		j.ExpiresAt = expiresAt(p)
		if p.transfer != nil && !j.ExpiresAt.IsZero() {
			j.Steps[0].Lines = append(j.Steps[0].Lines, "hold (captura MANUAL), expiraEm "+clock(j.ExpiresAt))
		}
		if closing, ok := holdClosedStep(p, ledger, now); ok {
			j.Steps = append(j.Steps, closing)
		}
	}
	j.Steps = append(j.Steps, projected)
	if p.down["notifications"] {
		st := Step{Title: "Notification", Service: "notifications"}
		downNote(&st)
		j.Steps = append(j.Steps, st)
	} else if p.notifications != nil {
		for _, n := range p.notifications.Notificacoes {
			st := Step{Title: "Notification (" + n.Canal + ")", Service: "notifications", State: stateDone}
			st.At = parseTime(n.AtualizadaEm)
			line := fmt.Sprintf("%s for %s after %d attempt(s)", n.Status, n.TipoEvento, n.Tentativas)
			if n.Tentativas > 1 && len(n.Historico) == 0 {
				// Attempts recorded before each got its row: notifications
				// retry through their retry topics, never in place.
				line += fmt.Sprintf(", %d of them from the retry topics", n.Tentativas-1)
			}
			for _, a := range n.Historico {
				st.Attempts = append(st.Attempts, AttemptLine{N: a.Tentativa, Channel: a.Canal, Topic: a.Topico,
					Outcome: a.Resultado, Error: a.Erro, Retry: isRetryTopic(a.Topico), At: parseTime(a.Em)})
			}
			if n.Erro != "" && n.Status != "DELIVERED" {
				line += "; last error: " + n.Erro
			}
			st.Lines = []string{line}
			switch n.Status {
			case "DELIVERED":
				st.At = parseTime(n.EntregueEm)
			case "PENDING":
				st.State = stateWaiting
				st.Note = "waiting in the notifications' retry topics since " + clock(parseTime(n.CriadaEm))
			case "FAILED":
				st.State = stateStuck
				st.Note = "delivery failed for good (on the notifications' dead-letter topic): " + n.Erro
			}
			j.Steps = append(j.Steps, st)
		}
	}
	if !accepted.At.IsZero() && !projected.At.IsZero() {
		j.EndToEnd = humanDuration(projected.At.Sub(accepted.At))
	}
	j.Refunds = refundLines(p)
	j.Marks = marks(j.Steps)
	if p.transfersOut != nil {
		for _, ev := range p.transfersOut.Eventos {
			if parts := strings.Split(ev.Traceparent, "-"); len(parts) == 4 && len(parts[1]) == 32 {
				j.TraceID = parts[1]
				break
			}
		}
	}
	return j
}
