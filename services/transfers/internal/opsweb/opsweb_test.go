package opsweb_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/services/transfers/internal/opsweb"
	tpg "github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/test/support/opstest"
)

// TestAccountTransfersPaged: an account's transfers, from and to it,
// newest first, each exactly once across the pages; bad input changes
// nothing and says why.
func TestAccountTransfersPaged(t *testing.T) {
	t.Parallel()
	db := opstest.DB(t, "transfers")
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	insert := func(from, to string, at time.Time) string {
		id := uuid.NewString()
		_, err := db.Exec(t.Context(), `
INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status, criada_em, atualizada_em,
                           hash_requisicao, resposta_status, resposta_corpo, cliente_id)
VALUES ($1, $2, $3, 100, 'BRL', 'PENDENTE', $4, $4, decode(repeat('ab', 32), 'hex'), 202, '\x7b7d', 'loja')`, id, from, to, at)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	var want []string // newest first
	for i, pair := range [][2]string{{"CC-A", "CC-B"}, {"CC-B", "CC-A"}, {"CC-A", "CC-C"}, {"CC-C", "CC-A"}, {"CC-A", "CC-B"}} {
		want = append([]string{insert(pair[0], pair[1], base.Add(time.Duration(i)*time.Second))}, want...)
	}
	insert("CC-B", "CC-C", base) // not CC-A's

	ops := opstest.Serve(t, nil, opsweb.Routes(tpg.NewStore(db, nil, "", nil, 0), nil, slog.New(slog.DiscardHandler)))

	var got []string
	cursor := ""
	for page := 0; page < 5; page++ {
		q := url.Values{"limite": {"2"}}
		if cursor != "" {
			q.Set("apos", cursor)
		}
		var p opsweb.Page
		if code := ops.Get("/ops/contas/CC-A/transferencias?"+q.Encode(), &p); code != http.StatusOK {
			t.Fatalf("page %d = %d", page, code)
		}
		for _, tr := range p.Transferencias {
			got = append(got, tr.ID)
		}
		if cursor = p.Proxima; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transfers of CC-A mismatch (-want +got):\n%s", diff)
	}

	var one opsapi.OperatorTransfer
	if code := ops.Get("/ops/transferencias/"+want[0], &one); code != http.StatusOK || one.ClienteID != "loja" || one.ContaOrigem != "CC-A" {
		t.Errorf("GET one = %d %+v", code, one)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/ops/transferencias/" + uuid.NewString(), http.StatusNotFound},
		{"/ops/transferencias/not-a-uuid", http.StatusBadRequest},
		{"/ops/contas/bad%20id/transferencias", http.StatusBadRequest},
		{"/ops/contas/CC-A/transferencias?limite=0", http.StatusUnprocessableEntity},
		{"/ops/contas/CC-A/transferencias?limite=101", http.StatusUnprocessableEntity},
		{"/ops/contas/CC-A/transferencias?apos=garbage", http.StatusUnprocessableEntity},
		{"/ops/contas/CC-A/transferencias?limite=", http.StatusUnprocessableEntity},
		{"/ops/contas/CC-A/transferencias?limite=1&limite=", http.StatusBadRequest},
		{"/ops/contas/CC-A/transferencias?apos=&apos=x", http.StatusBadRequest},
	} {
		if code := ops.Get(tc.path, nil); code != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.path, code, tc.want)
		}
	}
}
