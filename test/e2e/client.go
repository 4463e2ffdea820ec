package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/apiclient"
	"github.com/paysuite/payments/test/support/poll"
)

// TransferRequest is the body of POST /transferencias.
type TransferRequest struct {
	From        string `json:"contaOrigem"`
	To          string `json:"contaDestino"`
	AmountCents int64  `json:"valorEmCentavos"`
	Currency    string `json:"moeda"`
}

// Transfer is the body of GET /transferencias/{id}.
type Transfer struct {
	ID          string    `json:"id"`
	From        string    `json:"contaOrigem"`
	To          string    `json:"contaDestino"`
	AmountCents int64     `json:"valorEmCentavos"`
	Currency    string    `json:"moeda"`
	Status      string    `json:"status"`
	Reason      string    `json:"motivo,omitempty"`
	CreatedAt   time.Time `json:"criadaEm"`
	UpdatedAt   time.Time `json:"atualizadaEm"`
}

// Account is the body of GET /contas/{id}.
type Account struct {
	ID           string `json:"id"`
	Currency     string `json:"moeda"`
	BalanceCents int64  `json:"saldoEmCentavos"`
}

// Posting is one item of GET /contas/{id}/lancamentos.
type Posting struct {
	ID          json.RawMessage `json:"id"`
	TransferID  string          `json:"transferenciaId"`
	Direction   string          `json:"tipo"`
	AmountCents int64           `json:"valorEmCentavos"`
	CreatedAt   time.Time       `json:"criadoEm"`
}

// Terminal statuses.
const (
	StatusPending  = "PENDENTE"
	StatusSettled  = "LIQUIDADA"
	StatusRejected = "REJEITADA"
)

// ErrStopped is returned by Do when the target service is stopped.
var ErrStopped = errors.New("service stopped")

// Do sends one request to the service and reads the answer. body, if not
// nil, is sent as JSON; key, if not empty, as the Idempotency-Key.
func (s *Suite) Do(ctx context.Context, svc *Service, method, path, key string, body any) (apiclient.Response, error) {
	base := svc.URL()
	if base == "" {
		return apiclient.Response{}, fmt.Errorf("%s %s: %w", method, path, ErrStopped)
	}
	return apiclient.Client{HTTP: s.client, Authorization: s.bearer}.Do(ctx, method, base+path, key, body)
}

// must sends a request and fails the test unless the status is one of want;
// the body is decoded into out when out is not nil.
func (s *Suite) must(tb testing.TB, svc *Service, method, path, key string, body, out any, want ...int) apiclient.Response {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Do(ctx, svc, method, path, key, body)
	if err != nil {
		tb.Fatalf("%s %s%s: %v", method, svc.Name, path, err)
	}
	ok := false
	for _, w := range want {
		ok = ok || r.Status == w
	}
	if !ok {
		tb.Fatalf("%s %s%s: status %d, want %v: %s", method, svc.Name, path, r.Status, want, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			tb.Fatalf("%s %s%s: decode %s: %v", method, svc.Name, path, r.Body, err)
		}
	}
	return r
}

// OpenAccount opens an account through the ledger API.
func (s *Suite) OpenAccount(tb testing.TB, id, currency string) {
	tb.Helper()
	s.must(tb, s.Ledger, http.MethodPost, "/contas", "", map[string]string{"id": id, "moeda": currency}, nil, http.StatusCreated)
}

// Deposit funds an account through the ledger API, as the suite's minting
// client (Minter): the clients that transfer never hold contas:depositar.
func (s *Suite) Deposit(tb testing.TB, id string, cents int64) {
	tb.Helper()
	s.As(s.Minter).must(tb, s.Ledger, http.MethodPost, "/contas/"+url.PathEscape(id)+"/depositos", uuid.NewString(),
		map[string]int64{"valorEmCentavos": cents}, nil, http.StatusCreated)
}

// Account reads an account through the ledger API.
func (s *Suite) Account(tb testing.TB, id string) Account {
	tb.Helper()
	var a Account
	s.must(tb, s.Ledger, http.MethodGet, "/contas/"+url.PathEscape(id), "", nil, &a, http.StatusOK)
	return a
}

// Postings reads every posting of an account through the ledger API,
// following the cursor.
func (s *Suite) Postings(tb testing.TB, id string) []Posting {
	tb.Helper()
	var all []Posting
	cursor := ""
	for page := 0; ; page++ {
		if page > 10_000 {
			tb.Fatalf("postings of %s: the cursor never ends", id)
		}
		q := url.Values{"limite": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p struct {
			Items      []Posting `json:"itens"`
			NextCursor *string   `json:"proximoCursor"`
		}
		s.must(tb, s.Ledger, http.MethodGet, "/contas/"+url.PathEscape(id)+"/lancamentos?"+q.Encode(), "", nil, &p, http.StatusOK)
		all = append(all, p.Items...)
		if p.NextCursor == nil || *p.NextCursor == "" {
			return all
		}
		cursor = *p.NextCursor
	}
}

// Transfer reads a transfer through the transfers API.
func (s *Suite) Transfer(tb testing.TB, id string) Transfer {
	tb.Helper()
	var t Transfer
	s.must(tb, s.Transfers, http.MethodGet, "/transferencias/"+id, "", nil, &t, http.StatusOK)
	return t
}

// PostTransfer sends POST /transferencias once.
func (s *Suite) PostTransfer(ctx context.Context, key string, req TransferRequest) (apiclient.Response, error) {
	return s.Do(ctx, s.Transfers, http.MethodPost, "/transferencias", key, req)
}

// MaxWait bounds every wait of a progressing flow, however slow the host.
const MaxWait = 10 * time.Minute

// WhileProgressing is poll.WhileProgressing bounded by MaxWait.
func WhileProgressing(tb testing.TB, stall time.Duration, what string, cond func() (done bool, progress int64, why string)) {
	tb.Helper()
	poll.WhileProgressing(tb, stall, MaxWait, what, cond)
}

// WaitTerminal waits until none of the transfers is PENDENTE in the
// transfers database (failing if none became terminal for stall), then
// reads each through the API (16 at a time) and returns them by id.
func (s *Suite) WaitTerminal(tb testing.TB, ids []string, stall time.Duration) map[string]Transfer {
	tb.Helper()
	uids := toUUIDs(ids)
	WhileProgressing(tb, stall, fmt.Sprintf("%d transfers terminal", len(ids)), func() (bool, int64, string) {
		var total, pending int
		err := s.Transfers.DB.QueryRow(context.Background(),
			`SELECT count(*), count(*) FILTER (WHERE status = 'PENDENTE') FROM transferencia WHERE id = ANY($1)`, uids).
			Scan(&total, &pending)
		if err != nil {
			return false, 0, err.Error()
		}
		return total == len(ids) && pending == 0, int64(total - pending),
			fmt.Sprintf("%d of %d stored, %d PENDENTE; %s", total, len(ids), pending, s.Progress(ids))
	})
	out := make(map[string]Transfer, len(ids))
	results := make([]Transfer, len(ids))
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(ids))
	for i, id := range ids {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := s.Do(ctx, s.Transfers, http.MethodGet, "/transferencias/"+id, "", nil)
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("GET /transferencias/%s: status %d: %s", id, r.Status, r.Body)
			}
			if err == nil {
				err = json.Unmarshal(r.Body, &results[i])
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		tb.Fatalf("read transfers: %v", err)
	}
	for i, id := range ids {
		out[id] = results[i]
	}
	return out
}

// Progress says how far the transfers have got at each stage of the flow:
// decided by antifraud, decided by the ledger, terminal in the transfers
// service, logged by the notifications service.
func (s *Suite) Progress(ids []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uids := toUUIDs(ids)
	count := func(svc *Service, query string) string {
		var n int
		if err := svc.DB.QueryRow(ctx, query, uids).Scan(&n); err != nil {
			return "?"
		}
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("of %d: antifraud %s, ledger %s, terminal %s, notified %s", len(ids),
		count(s.Antifraud, `SELECT count(*) FROM decision WHERE transfer_id = ANY($1)`),
		count(s.Ledger, `SELECT count(*) FROM processed_transfer WHERE transfer_id = ANY($1)`),
		count(s.Transfers, `SELECT count(*) FROM transferencia WHERE id = ANY($1) AND status <> 'PENDENTE'`),
		count(s.Notifications, `SELECT count(*) FROM notification WHERE transfer_id = ANY($1) AND status = 'DELIVERED'`))
}
