package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/opsapi"
)

// TestJourneyOfRefunds: a transfer's refunds show, oldest first, with
// their amount, status (a rejection's motivo), request time and, once
// decided, decision time; the summary shows valorEstornadoEmCentavos. A
// transfer never refunded shows neither.
func TestJourneyOfRefunds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return opsapi.Time(now.Add(d)) }
	tr := &opsapi.OperatorTransfer{Transfer: opsapi.Transfer{ID: "t1", ContaOrigem: "CC-1", ContaDestino: "CC-2", ValorEmCentavos: 10_000,
		Moeda: "BRL", Status: "LIQUIDADA", ValorEstornadoEmCentavos: 3_000}}
	refunds := &opsapi.Refunds{Estornos: []opsapi.Refund{
		{ID: "e1", TransferenciaID: "t1", ValorEmCentavos: 3_000, Status: "LIQUIDADO", CriadoEm: at(-3 * time.Minute), AtualizadoEm: at(-170 * time.Second)},
		{ID: "e2", TransferenciaID: "t1", ValorEmCentavos: 5_000, Status: "REJEITADO", Motivo: "SALDO_INSUFICIENTE",
			CriadoEm: at(-2 * time.Minute), AtualizadoEm: at(-110 * time.Second)},
		{ID: "e3", TransferenciaID: "t1", ValorEmCentavos: 1_000, Status: "PENDENTE", CriadoEm: at(-time.Second), AtualizadoEm: at(-time.Second)},
	}}
	j := buildJourney("t1", journeyParts{transfer: tr, refunds: refunds}, now)
	want := []RefundLine{
		{ID: "e1", Amount: "30.00 BRL", Status: "LIQUIDADO", RequestedAt: now.Add(-3 * time.Minute), DecidedAt: now.Add(-170 * time.Second)},
		{ID: "e2", Amount: "50.00 BRL", Status: "REJEITADO", Reason: "SALDO_INSUFICIENTE", RequestedAt: now.Add(-2 * time.Minute),
			DecidedAt: now.Add(-110 * time.Second)},
		{ID: "e3", Amount: "10.00 BRL", Status: "PENDENTE", RequestedAt: now.Add(-time.Second)},
	}
	if diff := cmp.Diff(want, j.Refunds); diff != "" {
		t.Errorf("refunds mismatch (-want +got):\n%s", diff)
	}
	page := renderJourney(t, j)
	for _, w := range []string{
		`<dd id="refunded">30.00 BRL</dd>`,
		`<td class="num">30.00 BRL</td><td class="status status-LIQUIDADO">LIQUIDADO</td><td>2026-12-01 09:57:00.000 UTC</td><td>2026-12-01 09:57:10.000 UTC</td>`,
		`<td class="status status-REJEITADO">REJEITADO: SALDO_INSUFICIENTE</td>`,
		`<td class="status status-PENDENTE">PENDENTE</td><td>2026-12-01 09:59:59.000 UTC</td><td></td>`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("journey page lacks %q:\n%s", w, page)
		}
	}

	never := *tr
	never.ValorEstornadoEmCentavos = 0
	page = renderJourney(t, buildJourney("t1", journeyParts{transfer: &never, refunds: &opsapi.Refunds{}}, now))
	for _, absent := range []string{`id="refunded"`, `id="refunds"`} {
		if strings.Contains(page, absent) {
			t.Errorf("a transfer never refunded shows %s", absent)
		}
	}
}
