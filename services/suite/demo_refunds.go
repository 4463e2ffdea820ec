package suite

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/auth"
)

// The demo's two refunds (CONTRACTS.md section 10) of its settled
// transfer, asked by the destination's titular (DemoClient, which opened
// the destination account) with its RefundToken: a partial one that the
// ledger settles, then one for more than what remains, which the
// transfers service refuses at the door.
const (
	// RefundCents is the partial refund that settles.
	RefundCents int64 = 10_000
	// ExcessRefundCents exceeds what remains refundable once RefundCents
	// is counted (the settled transfer is 30_000).
	ExcessRefundCents int64 = 25_000
	// problemRefundExceeds ends the type of the excess refund's 422.
	problemRefundExceeds = "refund-exceeds-refundable"
)

// RefundScopes are the scopes of the demo client's refund token: refunds
// only, so the demo's main token (DemoScopes) never refunds.
var RefundScopes = []string{auth.ScopeTransfersRefund}

// demoRefunds is what the demo's refunds of one transfer came to.
type demoRefunds struct {
	TransferID string
	// SettledID is the partial refund's id (its Idempotency-Key).
	SettledID string
	// ExcessType is the problem type of the excess refund's answer.
	ExcessType string
}

// askRefunds asks, as the destination's titular, for a partial refund of
// the settled transfer id and then for one that exceeds what remains.
// The transfers service sums the refunds not rejected of a transfer under
// its row lock, so the second is a 422 refund-exceeds-refundable at once:
// it never reaches the ledger (which would reject it with
// VALOR_EXCEDE_ESTORNAVEL, were the two services' counts ever apart).
func (d *Demo) askRefunds(ctx context.Context, id string) (*demoRefunds, error) {
	fmt.Fprintln(d.Out, "-- refunds of the settled transfer (POST /transferencias/{id}/estornos, as its destination's titular, scope "+auth.ScopeTransfersRefund+")")
	r := &demoRefunds{TransferID: id, SettledID: uuid.NewString()}
	path := d.Transfers + "/transferencias/" + id + "/estornos"
	resp, err := d.callAs(ctx, d.RefundToken, http.MethodPost, path, r.SettledID, map[string]any{"valorEmCentavos": RefundCents}, http.StatusAccepted)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(d.Out, "   %-38s %s -> 202 %v\n", fmt.Sprintf("partial refund (%d cents)", RefundCents), r.SettledID, resp.body["status"])
	resp, err = d.callAs(ctx, d.RefundToken, http.MethodPost, path, uuid.NewString(), map[string]any{"valorEmCentavos": ExcessRefundCents},
		http.StatusUnprocessableEntity)
	if err != nil {
		return nil, err
	}
	r.ExcessType, _ = resp.body["type"].(string)
	fmt.Fprintf(d.Out, "   %-38s -> 422 %s: %v\n", fmt.Sprintf("refund over what remains (%d cents)", ExcessRefundCents),
		r.ExcessType[strings.LastIndex(r.ExcessType, "/")+1:], resp.body["detail"])
	return r, nil
}

// settleRefunds waits for the partial refund to reach its final status
// (GET /transferencias/{id}/estornos/{estornoId}) and checks both
// refunds' outcomes and the transfer's valorEstornadoEmCentavos; it
// returns the expectations that did not hold.
func (d *Demo) settleRefunds(ctx context.Context, r *demoRefunds) ([]string, error) {
	fmt.Fprintln(d.Out, "-- waiting for the partial refund (GET /transferencias/{id}/estornos/{estornoId})")
	var refund map[string]any
	deadline := time.Now().Add(d.Timeout)
	for {
		resp, err := d.call(ctx, http.MethodGet, d.Transfers+"/transferencias/"+r.TransferID+"/estornos/"+r.SettledID, "", nil, http.StatusOK)
		if err != nil {
			return nil, err
		}
		if st, _ := resp.body["status"].(string); st != statusPending {
			refund = resp.body
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("refund %s still PENDENTE at %s", r.SettledID, deadline.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	t, err := d.call(ctx, http.MethodGet, d.Transfers+"/transferencias/"+r.TransferID, "", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var failures []string
	st, _ := refund["status"].(string)
	mark := "ok"
	if st != "LIQUIDADO" {
		mark = "MISMATCH"
		failures = append(failures, fmt.Sprintf("partial refund: got %s %v, want LIQUIDADO", st, refund["motivo"]))
	}
	fmt.Fprintf(d.Out, "   %-38s %s %v at %v  %s\n", "partial refund", st, refund["valorEmCentavos"], refund["atualizadoEm"], mark)
	mark = "ok"
	if !strings.HasSuffix(r.ExcessType, "/"+problemRefundExceeds) {
		mark = "MISMATCH"
		failures = append(failures, fmt.Sprintf("refund over what remains: problem %q, want %s", r.ExcessType, problemRefundExceeds))
	}
	fmt.Fprintf(d.Out, "   %-38s refused (422 %s), nothing written  %s\n", "refund over what remains", problemRefundExceeds, mark)
	refunded, _ := t.body["valorEstornadoEmCentavos"].(float64)
	mark = "ok"
	if refunded != float64(RefundCents) || t.body["status"] != "LIQUIDADA" {
		mark = "MISMATCH"
		failures = append(failures, fmt.Sprintf("refunded transfer: %v with valorEstornadoEmCentavos %.0f, want LIQUIDADA with %d", t.body["status"], refunded, RefundCents))
	}
	fmt.Fprintf(d.Out, "   %-38s %v, valorEstornadoEmCentavos %.0f of %v  %s\n", "the refunded transfer", t.body["status"], refunded, t.body["valorEmCentavos"], mark)
	return failures, nil
}
