// Package ledgerhttp reads the ledger's record of a transfer over HTTP
// (GET /ops/liquidacoes/{id}, scope operacoes), as the operator who asked:
// the transfers service compares it with a held result before it applies
// one. The operator's own bearer token is forwarded; the service keeps no
// credential of its own for the ledger.
package ledgerhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// Timeout bounds one read of the ledger's record.
const Timeout = 5 * time.Second

// maxBody bounds the ledger's answer (a record and its two postings).
const maxBody = 1 << 20

// ErrUnavailable: the ledger could not be asked or did not answer with a
// record (unreachable, timed out, 5xx, refused the operator's token, an
// unreadable answer). Nothing was decided; the caller may try again.
var ErrUnavailable = errors.New("the ledger is unavailable")

// Client reads settlement records from one ledger.
type Client struct {
	base string
	http *http.Client
}

// New returns a client of the ledger at base (e.g. https://ledger:8081),
// whose URL the configuration checked (https, or http to the loopback or
// in development).
func New(base string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), http: &http.Client{Timeout: Timeout,
		// A redirect would carry the operator's token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Settlement returns the ledger's record of transfer id, read with the
// operator's bearer token. Errors: transfer.ErrNoSettlement when the
// ledger answers 404 (it never decided id); ErrUnavailable otherwise when
// no record could be read.
func (c *Client) Settlement(ctx context.Context, bearer string, id uuid.UUID) (transfer.Settlement, error) {
	path := strings.Replace(opsapi.PathSettlement, "{id}", id.String(), 1)
	// The base URL is configuration; the path is built from a UUID.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return transfer.Settlement{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req) //nolint:gosec // the URL is configuration, see above
	if err != nil {
		return transfer.Settlement{}, fmt.Errorf("%w: %v", ErrUnavailable, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return transfer.Settlement{}, fmt.Errorf("%w: answer cut short", ErrUnavailable)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return transfer.Settlement{}, fmt.Errorf("transfer %s: %w", id, transfer.ErrNoSettlement)
	case resp.StatusCode != http.StatusOK:
		return transfer.Settlement{}, fmt.Errorf("%w: it answered %d to the operator's token", ErrUnavailable, resp.StatusCode)
	}
	var s opsapi.Settlement
	if err := json.Unmarshal(body, &s); err != nil {
		return transfer.Settlement{}, fmt.Errorf("%w: unreadable answer", ErrUnavailable)
	}
	return fromWire(s)
}

// fromWire is the domain's view of the ledger's answer; an answer without
// a transfer id, or with a malformed request event id, is unreadable.
func fromWire(s opsapi.Settlement) (transfer.Settlement, error) {
	tid, err := uuid.Parse(s.TransferenciaID)
	if err != nil {
		return transfer.Settlement{}, fmt.Errorf("%w: the answer names no transfer", ErrUnavailable)
	}
	var req uuid.UUID
	if s.EventoSolicitacaoID != "" {
		if req, err = uuid.Parse(s.EventoSolicitacaoID); err != nil {
			return transfer.Settlement{}, fmt.Errorf("%w: malformed eventoSolicitacaoId", ErrUnavailable)
		}
	}
	return transfer.Settlement{TransferID: tid, Source: s.ContaOrigem, Destination: s.ContaDestino,
		AmountCents: s.ValorEmCentavos, Currency: s.Moeda, Client: s.ClienteID, RequestEventID: req,
		Result: transfer.Status(s.Resultado), Reason: s.Motivo}, nil
}
