package ui

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/opsapi"
)

// TestJourneyStuckWording: a transfer stuck at a step says where and for
// how long, in words, and offers the requeue of a DEAD event.
func TestJourneyStuckWording(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return opsapi.Time(now.Add(-d)) }
	pending := &opsapi.OperatorTransfer{Transfer: opsapi.Transfer{ID: "t1", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 100, Moeda: "BRL",
		Status: "PENDENTE"}, ClienteID: "loja", TransferTimes: opsapi.TransferTimes{CriadaEm: at(time.Minute), AtualizadaEm: at(time.Minute)}}
	published := &opsapi.Events{Eventos: []opsapi.Event{{ID: "e1", Topico: "solicitada", Chave: "CC-1", Tipo: "TransferenciaSolicitada",
		Status: "PUBLISHED", EnfileiradoEm: at(time.Minute), PublicadoEm: at(59 * time.Second)}}}
	approved := &opsDecision{Pontuacao: 10, Limiar: 80, Resultado: "APPROVED", DecididaEm: at(58 * time.Second)}
	settled := &opsapi.Settlement{Resultado: "LIQUIDADA", ProcessadaEm: at(57 * time.Second)}

	for _, tc := range []struct {
		name  string
		parts journeyParts
		step  int
		want  Step
	}{
		{
			name:  "waiting in the transfers' outbox",
			parts: journeyParts{transfer: pending, transfersOut: &opsapi.Events{Eventos: []opsapi.Event{{ID: "e1", Topico: "solicitada", Chave: "CC-1", Tipo: "TransferenciaSolicitada", Status: "PENDING", EnfileiradoEm: at(42 * time.Second)}}}},
			step:  1,
			want:  Step{Title: "Published to Kafka", Service: "transfers", State: stateWaiting, Note: "waiting in the transfers' outbox for 42 s"},
		},
		{
			name: "held back by an older DEAD event of its key",
			parts: journeyParts{transfer: pending, decision: approved, settlement: settled,
				ledgerOut:     &opsapi.Events{Eventos: []opsapi.Event{{ID: "e3", Topico: "liquidada", Chave: "CC-1", Tipo: "TransferenciaLiquidada", Status: "PENDING", EnfileiradoEm: at(42 * time.Second)}}},
				ledgerBacklog: &opsapi.Backlog{EventosMortos: []opsapi.DeadEvent{{ID: "e0", Topico: "liquidada", Chave: "CC-1", Erro: "MESSAGE_TOO_LARGE"}}}},
			step: 3,
			want: Step{Title: "Ledger settlement", Service: "ledger", State: stateWaiting, At: now.Add(-57 * time.Second), Lines: []string{"LIQUIDADA"},
				Note: "waiting in the ledger's outbox for 42 s: the key CC-1 has an older event held back (DEAD: MESSAGE_TOO_LARGE)"},
		},
		{
			name:  "DEAD in the transfers' outbox",
			parts: journeyParts{transfer: pending, transfersOut: &opsapi.Events{Eventos: []opsapi.Event{{ID: "e1", Topico: "solicitada", Tipo: "TransferenciaSolicitada", Status: "DEAD", Tentativas: 12, Erro: "refused", EnfileiradoEm: at(time.Minute)}}}},
			step:  1,
			want: Step{Title: "Published to Kafka", Service: "transfers", State: stateStuck,
				Note:    "DEAD in the transfers' outbox after 12 attempts: refused. Requeue it once the cause is fixed.",
				Requeue: &RequeueTarget{Service: "transfers", EventID: "e1"}},
		},
		{
			name:  "waiting for the ledger",
			parts: journeyParts{transfer: pending, transfersOut: published, decision: approved},
			step:  3,
			want:  Step{Title: "Ledger settlement", Service: "ledger", State: stateWaiting, Note: "waiting for the ledger for 58 s since antifraud decided"},
		},
		{
			name:  "blocked by antifraud never reaches the ledger",
			parts: journeyParts{transfer: pending, transfersOut: published, decision: &opsDecision{Pontuacao: 95, Limiar: 80, Resultado: "BLOCKED", Regras: []string{"high_amount"}, DecididaEm: at(58 * time.Second)}},
			step:  3,
			want:  Step{Title: "Ledger settlement", Service: "ledger", State: stateSkipped, Note: "not sent to the ledger: antifraud blocked the transfer"},
		},
		{
			name:  "a service down is named in its step",
			parts: journeyParts{transfer: pending, transfersOut: published, decision: approved, down: map[string]bool{"ledger": true}},
			step:  3,
			want:  Step{Title: "Ledger settlement", Service: "ledger", State: stateUnknown, Note: "ledger is unavailable: this step cannot be shown now"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := buildJourney("t1", tc.parts, now)
			if diff := cmp.Diff(tc.want, j.Steps[tc.step]); diff != "" {
				t.Errorf("step mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{850 * time.Millisecond, "850 ms"},
		{42 * time.Second, "42 s"},
		{185 * time.Second, "3 min 5 s"},
		{130 * time.Minute, "2 h 10 min"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestFormTokensAreSpentOnce: a form token works once, only in the session
// that issued it; the rate limit counts a session's actions per minute.
func TestFormTokensAreSpentOnce(t *testing.T) {
	t.Parallel()
	st := newSessions(time.Hour, 0)
	a := &session{id: "a", forms: map[string]time.Time{}}
	b := &session{id: "b", forms: map[string]time.Time{}}
	tok := st.formToken(a)
	for _, tc := range []struct {
		name string
		s    *session
		tok  string
		want bool
	}{
		{"another session", b, tok, false},
		{"empty", a, "", false},
		{"first use", a, tok, true},
		{"second use", a, tok, false},
		{"no session", nil, tok, false},
	} {
		if got := st.spend(tc.s, tc.tok); got != tc.want {
			t.Errorf("%s: spend = %v, want %v", tc.name, got, tc.want)
		}
	}
	for i := range 3 {
		if !st.allowAction(a, 3) {
			t.Fatalf("action %d refused within the limit", i+1)
		}
	}
	if st.allowAction(a, 3) {
		t.Error("a fourth action in a minute was allowed with a limit of 3")
	}
}

// TestJourneyTraceAndRequestID: the journey names the request id of the
// accepting request and the trace id of its event, when recorded.
func TestJourneyTraceAndRequestID(t *testing.T) {
	t.Parallel()
	tr := &opsapi.OperatorTransfer{Transfer: opsapi.Transfer{ID: "t1", Status: "PENDENTE"}, ClienteID: "loja", RequestID: "req-42",
		TransferTimes: opsapi.TransferTimes{CriadaEm: opsapi.Time(time.Now())}}
	out := &opsapi.Events{Eventos: []opsapi.Event{{ID: "e1", Tipo: "TransferenciaSolicitada", Status: "PENDING",
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", EnfileiradoEm: opsapi.Time(time.Now())}}}
	j := buildJourney("t1", journeyParts{transfer: tr, transfersOut: out}, time.Now())
	if j.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id = %q", j.TraceID)
	}
	if got := j.Steps[0].Lines[0]; got != "client loja, request id req-42" {
		t.Errorf("accepted line = %q", got)
	}
}

// TestJourneyNotificationAttempts: a notification that failed on the main
// topic and was delivered from a retry topic lists both attempts with
// their channel, topic (the retry topic named as such) and outcome, on the
// rendered page too.
func TestJourneyNotificationAttempts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return opsapi.Time(now.Add(-d)) }
	const main = "pagamentos.transferencia.liquidada.v1"
	notes := &opsNotifications{Notificacoes: []opsNotification{{
		EventoID: "e3", TipoEvento: "TransferenciaLiquidada", Canal: "webhook", Status: "DELIVERED", Tentativas: 2,
		EntregueEm: at(time.Second), CriadaEm: at(3 * time.Second), AtualizadaEm: at(time.Second),
		Historico: []opsAttempt{
			{Tentativa: 1, Canal: "webhook", Topico: main, Resultado: "FAILED", Erro: "HTTP 503", Em: at(3 * time.Second)},
			{Tentativa: 2, Canal: "webhook", Topico: main + "-retry-1000", Resultado: "DELIVERED", Em: at(time.Second)},
		},
	}}}
	settled := &opsapi.OperatorTransfer{Transfer: opsapi.Transfer{ID: "t1", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 100, Moeda: "BRL",
		Status: "LIQUIDADA"}, ClienteID: "loja", TransferTimes: opsapi.TransferTimes{CriadaEm: at(time.Minute), AtualizadaEm: at(time.Minute)}}
	j := buildJourney("t1", journeyParts{transfer: settled, notifications: notes}, now)
	st := j.Steps[len(j.Steps)-1]
	want := []AttemptLine{
		{N: 1, Channel: "webhook", Topic: main, Outcome: "FAILED", Error: "HTTP 503", At: now.Add(-3 * time.Second)},
		{N: 2, Channel: "webhook", Topic: main + "-retry-1000", Outcome: "DELIVERED", Retry: true, At: now.Add(-time.Second)},
	}
	if diff := cmp.Diff(want, st.Attempts); diff != "" {
		t.Errorf("attempts mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"DELIVERED for TransferenciaLiquidada after 2 attempt(s)"}, st.Lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}

	page := renderJourney(t, j)
	for _, w := range []string{
		"<td class=\"num\">1</td><td>2026-12-01 09:59:57.000 UTC</td><td>webhook</td><td><code>" + main + "</code> (main topic)</td><td>FAILED</td><td>HTTP 503</td>",
		"<td class=\"num\">2</td><td>2026-12-01 09:59:59.000 UTC</td><td>webhook</td><td><code>" + main + "-retry-1000</code> (retry topic)</td><td>DELIVERED</td>",
	} {
		if !strings.Contains(page, w) {
			t.Errorf("journey page lacks %q:\n%s", w, page)
		}
	}
}

func TestIsRetryTopic(t *testing.T) {
	t.Parallel()
	for topic, want := range map[string]bool{
		"t-retry-1000": true, "t": false, "t-retry-": false, "t-retry-x": false, "t-retry-1000.v1": false,
	} {
		if got := isRetryTopic(topic); got != want {
			t.Errorf("isRetryTopic(%q) = %v, want %v", topic, got, want)
		}
	}
}

// TestJourneyOfHolds: a hold's journey has the reservation with its
// expiry, then its capture (the amount captured of the amount reserved,
// with the postings), its cancellation or its expiry, or the wait for one
// with the time left; a hold the ledger rejected has no closing step.
func TestJourneyOfHolds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return opsapi.Time(now.Add(d)) }
	expiry := now.Add(90 * time.Minute)
	transfer := func(status string) *opsapi.OperatorTransfer {
		return &opsapi.OperatorTransfer{Transfer: opsapi.Transfer{ID: "t1", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 20_000,
			Moeda: "BRL", Status: status, Captura: "MANUAL", ExpiraEm: opsapi.Time(expiry)}, ClienteID: "loja",
			TransferTimes: opsapi.TransferTimes{CriadaEm: at(-time.Minute), AtualizadaEm: at(-30 * time.Second)}}
	}
	approved := &opsDecision{Pontuacao: 10, Limiar: 80, Resultado: "APPROVED", DecididaEm: at(-58 * time.Second)}
	reserved := func(estado string, captured int64, closed string, postings ...opsapi.Posting) *opsapi.Settlement {
		return &opsapi.Settlement{Resultado: "RESERVADA", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 20_000, Moeda: "BRL",
			ProcessadaEm: at(-57 * time.Second), Lancamentos: append([]opsapi.Posting{}, postings...),
			Reserva: &opsapi.Reservation{ValorEmCentavos: 20_000, ExpiraEm: opsapi.Time(expiry), Estado: estado,
				ValorCapturadoEmCentavos: captured, EncerradaEm: closed}}
	}
	reservation := Step{Title: "Ledger reservation", Service: "ledger", State: stateDone, At: now.Add(-57 * time.Second),
		Lines: []string{"reserved 200.00 BRL on CC-1 until " + clock(expiry)}}
	for _, tc := range []struct {
		name       string
		parts      journeyParts
		want       []Step // the ledger's steps: the reservation, then its closing
		noClosing  bool
		wantExpiry bool
	}{
		{
			name:  "reserved, waiting for a capture, a cancellation or the expiry",
			parts: journeyParts{transfer: transfer("RESERVADA"), decision: approved, settlement: reserved("ABERTA", 0, "")},
			want: []Step{reservation, {Title: "Capture, cancellation or expiry", Service: "ledger", State: stateWaiting,
				Note: "reserved until " + clock(expiry) + " (1 h 30 min from now): waiting for a capture, a cancellation or the expiry"}},
			wantExpiry: true,
		},
		{
			name: "captured in part, with its postings",
			parts: journeyParts{transfer: transfer("LIQUIDADA"), decision: approved, settlement: reserved("CAPTURADA", 5_000, at(-10*time.Second),
				opsapi.Posting{Conta: "CC-2", Direcao: "C", ValorEmCentavos: 5_000, SaldoApos: 5_000},
				opsapi.Posting{Conta: "CC-1", Direcao: "D", ValorEmCentavos: 5_000, SaldoApos: 95_000})},
			want: []Step{reservation, {Title: "Captured", Service: "ledger", State: stateDone, At: now.Add(-10 * time.Second),
				Lines: []string{"captured 50.00 BRL of the 200.00 BRL reserved; the other 150.00 BRL released"},
				Postings: []PostingLine{{Account: "CC-2", Side: "credit", Amount: "50.00 BRL", BalanceAfter: "50.00 BRL"},
					{Account: "CC-1", Side: "debit", Amount: "50.00 BRL", BalanceAfter: "950.00 BRL"}}}},
			wantExpiry: true,
		},
		{
			name:  "cancelled",
			parts: journeyParts{transfer: transfer("CANCELADA"), decision: approved, settlement: reserved("CANCELADA", 0, at(-10*time.Second))},
			want: []Step{reservation, {Title: "Cancelled", Service: "ledger", State: stateDone, At: now.Add(-10 * time.Second),
				Lines: []string{"cancelled by the client: the 200.00 BRL reserved released"}}},
			wantExpiry: true,
		},
		{
			name:  "expired",
			parts: journeyParts{transfer: transfer("EXPIRADA"), decision: approved, settlement: reserved("EXPIRADA", 0, at(-10*time.Second))},
			want: []Step{reservation, {Title: "Expired", Service: "ledger", State: stateDone, At: now.Add(-10 * time.Second),
				Lines: []string{"expired at its expiraEm " + clock(expiry) + ": the 200.00 BRL reserved released"}}},
			wantExpiry: true,
		},
		{
			name: "rejected by the ledger: no closing step",
			parts: journeyParts{transfer: transfer("REJEITADA"), decision: approved, settlement: &opsapi.Settlement{Resultado: "REJEITADA",
				Motivo: "SALDO_INSUFICIENTE", ProcessadaEm: at(-57 * time.Second), Lancamentos: []opsapi.Posting{}}},
			want: []Step{{Title: "Ledger rejection", Service: "ledger", State: stateDone, At: now.Add(-57 * time.Second),
				Lines: []string{"rejected: SALDO_INSUFICIENTE"}}},
			noClosing:  true,
			wantExpiry: true,
		},
		{
			name:  "not reserved yet",
			parts: journeyParts{transfer: transfer("PENDENTE"), decision: approved},
			want: []Step{{Title: "Ledger settlement", Service: "ledger", State: stateWaiting, Note: "waiting for the ledger for 58 s since antifraud decided"},
				{Title: "Capture, cancellation or expiry", Service: "ledger", State: stateWaiting, Note: "not reached yet: the ledger has not reserved the amount"}},
			wantExpiry: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := buildJourney("t1", tc.parts, now)
			wantSteps := 6
			if tc.noClosing {
				wantSteps = 5
			}
			if len(j.Steps) != wantSteps {
				t.Fatalf("%d steps, want %d: %+v", len(j.Steps), wantSteps, j.Steps)
			}
			if diff := cmp.Diff(tc.want, j.Steps[3:3+len(tc.want)]); diff != "" {
				t.Errorf("ledger steps mismatch (-want +got):\n%s", diff)
			}
			if last := j.Steps[len(j.Steps)-1]; last.Title != "Status projected" {
				t.Errorf("last step %q, want Status projected", last.Title)
			}
			if tc.wantExpiry && !j.ExpiresAt.Equal(expiry) {
				t.Errorf("ExpiresAt = %v, want %v", j.ExpiresAt, expiry)
			}
			if want := "hold (captura MANUAL), expiraEm " + clock(expiry); !strings.Contains(strings.Join(j.Steps[0].Lines, "\n"), want) {
				t.Errorf("request step lines %q lack %q", j.Steps[0].Lines, want)
			}
		})
	}

	// The rendered page shows the capture mode, the expiry and the amount
	// captured in its summary.
	captured := transfer("LIQUIDADA")
	captured.ValorLiquidadoEmCentavos = 5_000
	page := renderJourney(t, buildJourney("t1", journeyParts{transfer: captured, decision: approved,
		settlement: reserved("CAPTURADA", 5_000, at(-10*time.Second))}, now))
	for _, w := range []string{
		`<dd id="capture">MANUAL</dd>`,
		`<dd id="expires"><time datetime="2026-12-01T11:30:00Z">2026-12-01 11:30:00.000 UTC</time></dd>`,
		`<dd id="captured">50.00 BRL</dd>`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("journey page lacks %q:\n%s", w, page)
		}
	}

	// An immediate transfer has neither an expiry nor a closing step.
	j := buildJourney("t2", journeyParts{transfer: &opsapi.OperatorTransfer{Transfer: opsapi.Transfer{ID: "t2", Status: "LIQUIDADA", Moeda: "BRL"}},
		decision: approved, settlement: &opsapi.Settlement{Resultado: "LIQUIDADA", ProcessadaEm: at(-time.Second)}}, now)
	if len(j.Steps) != 5 || !j.ExpiresAt.IsZero() {
		t.Errorf("immediate transfer: %d steps, expiry %v; want 5 and none", len(j.Steps), j.ExpiresAt)
	}
}

// renderJourney renders j as the journey page.
func renderJourney(t *testing.T, j Journey) string {
	t.Helper()
	s, err := New(Config{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.pages["journey"].Execute(&b, view{Title: "Transfer", Data: j, csrf: func() string { return "x" }}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
