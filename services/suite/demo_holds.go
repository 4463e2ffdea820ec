package suite

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/events"
)

// HoldExpiry is how long after its request the demo's expiring hold
// lasts: just over the shortest expiraEm the transfers service accepts
// (1 minute), so the demo sees the ledger release it without waiting
// long.
const HoldExpiry = 62 * time.Second

// Statuses of a transfer the demo waits for (CONTRACTS.md sections 1 and 9).
const (
	statusPending  = "PENDENTE"
	statusReserved = "RESERVADA"
)

// demoHold is one of the demo's holds (CONTRACTS.md section 9) and the
// ending it must reach.
type demoHold struct {
	Name        string
	ID          string
	AmountCents int64
	// CaptureCents, when not zero, is captured (less than AmountCents: a
	// capture in part); Cancel cancels the hold; with neither, the hold
	// is left to expire at ExpiresAt.
	CaptureCents int64
	Cancel       bool
	ExpiresAt    time.Time
	WantStatus   string
	// Final is the transfer as GET /transferencias/{id} last showed it.
	Final map[string]any
}

// demoHolds are the demo's three holds from one account to another: one
// captured in part, one cancelled, one left to expire HoldExpiry after
// now. The expiring one comes first, so its minute runs while the rest
// of the demo does.
func demoHolds(now time.Time) []*demoHold {
	return []*demoHold{
		{Name: "hold left to expire", AmountCents: 7_000, ExpiresAt: now.Add(HoldExpiry).Truncate(time.Second), WantStatus: "EXPIRADA"},
		{Name: "hold captured in part (50 of 200)", AmountCents: 20_000, CaptureCents: 5_000, WantStatus: "LIQUIDADA"},
		{Name: "hold cancelled", AmountCents: 10_000, Cancel: true, WantStatus: "CANCELADA"},
	}
}

// reservedCents is what holds keep reserved while every one is open.
func reservedCents(holds []*demoHold) int64 {
	var n int64
	for _, h := range holds {
		n += h.AmountCents
	}
	return n
}

// capturedCents is what holds move once they ended as they must.
func capturedCents(holds []*demoHold) int64 {
	var n int64
	for _, h := range holds {
		n += h.CaptureCents
	}
	return n
}

// submitHolds asks for holds from one account to another
// (POST /transferencias with "captura":"MANUAL" and, for the expiring
// one, "expiraEm").
func (d *Demo) submitHolds(ctx context.Context, holds []*demoHold, from, to string) error {
	fmt.Fprintln(d.Out, "-- submitting holds (POST /transferencias, \"captura\":\"MANUAL\")")
	for _, h := range holds {
		h.ID = uuid.NewString()
		body := map[string]any{"contaOrigem": from, "contaDestino": to, "valorEmCentavos": h.AmountCents, "moeda": "BRL",
			"captura": events.CaptureManual}
		expiry := "default expiraEm (7 days)"
		if !h.ExpiresAt.IsZero() {
			body["expiraEm"] = h.ExpiresAt.UTC().Format(time.RFC3339)
			expiry = "expiraEm " + h.ExpiresAt.UTC().Format(time.RFC3339)
		}
		resp, err := d.call(ctx, http.MethodPost, d.Transfers+"/transferencias", h.ID, body, http.StatusAccepted)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.Out, "   %-38s %s -> 202 %v, %s\n", h.Name, h.ID, resp.body["status"], expiry)
	}
	return nil
}

// closeHolds waits until every hold is RESERVADA, shows the source
// account's reserved and available balances, then captures and cancels
// the holds that say so (POST /transferencias/{id}/captura and
// /cancelamento, each with its own Idempotency-Key) and waits for those
// to end. It returns the expectations that did not hold.
func (d *Demo) closeHolds(ctx context.Context, holds []*demoHold, from string) ([]string, error) {
	var failures []string
	fmt.Fprintln(d.Out, "-- waiting for the reservations (GET /transferencias/{id})")
	ids := make([]string, len(holds))
	for i, h := range holds {
		ids[i] = h.ID
	}
	final, err := d.waitFor(ctx, ids, "holds reserved", time.Now().Add(d.Timeout), func(st string) bool { return st != statusPending })
	if err != nil {
		return nil, err
	}
	for i, h := range holds {
		h.Final = final[i]
		if st, _ := final[i]["status"].(string); st != statusReserved {
			return append(failures, fmt.Sprintf("%s: got %s, want %s before its capture, cancellation or expiry", h.Name, st, statusReserved)), nil
		}
		fmt.Fprintf(d.Out, "   %-38s RESERVADA until %v\n", h.Name, final[i]["expiraEm"])
	}
	bal, err := d.call(ctx, http.MethodGet, d.Ledger+"/contas/"+from, "", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	saldo, _ := bal.body["saldoEmCentavos"].(float64)
	reservado, _ := bal.body["reservadoEmCentavos"].(float64)
	disponivel, _ := bal.body["disponivelEmCentavos"].(float64)
	mark := "ok"
	if want := float64(reservedCents(holds)); reservado != want || disponivel != saldo-reservado {
		mark = "MISMATCH"
		failures = append(failures, fmt.Sprintf("balance of %s with its holds open: reservado %.0f, disponivel %.0f, saldo %.0f; want reservado %.0f and disponivel = saldo - reservado",
			from, reservado, disponivel, saldo, want))
	}
	fmt.Fprintf(d.Out, "   %s: saldo %.0f, reservado %.0f, disponivel %.0f cents  %s\n", from, saldo, reservado, disponivel, mark)

	fmt.Fprintln(d.Out, "-- capturing and cancelling (POST /transferencias/{id}/captura, /cancelamento)")
	var closing []string
	for _, h := range holds {
		switch {
		case h.CaptureCents > 0:
			if _, err := d.call(ctx, http.MethodPost, d.Transfers+"/transferencias/"+h.ID+"/captura", uuid.NewString(),
				map[string]any{"valorEmCentavos": h.CaptureCents}, http.StatusAccepted); err != nil {
				return nil, err
			}
			fmt.Fprintf(d.Out, "   %-38s capture %d of %d cents -> 202\n", h.Name, h.CaptureCents, h.AmountCents)
		case h.Cancel:
			if _, err := d.call(ctx, http.MethodPost, d.Transfers+"/transferencias/"+h.ID+"/cancelamento", uuid.NewString(),
				nil, http.StatusAccepted); err != nil {
				return nil, err
			}
			fmt.Fprintf(d.Out, "   %-38s cancel -> 202\n", h.Name)
		default:
			continue
		}
		closing = append(closing, h.ID)
	}
	final, err = d.waitFor(ctx, closing, "captured or cancelled holds ended", time.Now().Add(d.Timeout),
		func(st string) bool { return st != statusReserved })
	if err != nil {
		return nil, err
	}
	for i, id := range closing {
		for _, h := range holds {
			if h.ID == id {
				h.Final = final[i]
			}
		}
	}
	return failures, nil
}

// awaitExpiry waits for the holds left open (neither captured nor
// cancelled) to expire: the ledger releases each once past its expiraEm,
// at its next expiry sweep.
func (d *Demo) awaitExpiry(ctx context.Context, holds []*demoHold) error {
	for _, h := range holds {
		if h.CaptureCents > 0 || h.Cancel {
			continue
		}
		fmt.Fprintf(d.Out, "-- waiting for %q to expire at %s (its expiraEm; the ledger releases it by itself)\n",
			h.Name, h.ExpiresAt.UTC().Format(time.RFC3339))
		final, err := d.waitFor(ctx, []string{h.ID}, "hold expired", h.ExpiresAt.Add(d.Timeout),
			func(st string) bool { return st != statusReserved })
		if err != nil {
			return err
		}
		h.Final = final[0]
		fmt.Fprintf(d.Out, "   %-38s %v at %v\n", h.Name, h.Final["status"], h.Final["atualizadaEm"])
	}
	return nil
}

// holdFailures checks each hold's ending: its status, and a capture's
// valorLiquidadoEmCentavos.
func holdFailures(holds []*demoHold) []string {
	var failures []string
	for _, h := range holds {
		st, _ := h.Final["status"].(string)
		if st != h.WantStatus {
			failures = append(failures, fmt.Sprintf("%s: got %s, want %s", h.Name, st, h.WantStatus))
		}
		if h.CaptureCents > 0 {
			if got, _ := h.Final["valorLiquidadoEmCentavos"].(float64); got != float64(h.CaptureCents) {
				failures = append(failures, fmt.Sprintf("%s: valorLiquidadoEmCentavos %.0f, want %d", h.Name, got, h.CaptureCents))
			}
		}
	}
	return failures
}

// waitFor polls GET /transferencias/{id} of ids until done holds for every
// status, or deadline, printing the progress as what when it changes; it returns the
// transfers as last read, in the order of ids.
func (d *Demo) waitFor(ctx context.Context, ids []string, what string, deadline time.Time, done func(status string) bool) ([]map[string]any, error) {
	final := make([]map[string]any, len(ids))
	shown := -1
	for {
		n := 0
		for i, id := range ids {
			if final[i] != nil {
				n++
				continue
			}
			r, err := d.call(ctx, http.MethodGet, d.Transfers+"/transferencias/"+id, "", nil, http.StatusOK)
			if err != nil {
				return nil, err
			}
			if st, _ := r.body["status"].(string); done(st) {
				final[i] = r.body
				n++
			}
		}
		if n != shown { // a line per change, not per poll: a wait may last a minute
			fmt.Fprintf(d.Out, "\r   %d of %d %s", n, len(ids), what)
			shown = n
		}
		if n == len(ids) {
			fmt.Fprintln(d.Out)
			return final, nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(d.Out)
			return nil, fmt.Errorf("only %d of %d %s by %s", n, len(ids), what, deadline.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
