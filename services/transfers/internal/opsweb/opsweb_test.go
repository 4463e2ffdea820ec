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

// TestTransferRefunds: an operator reads a transfer's refunds, oldest
// first, each with its amount, status, motivo and times; an unknown
// transfer has none; a bad id is a 400.
func TestTransferRefunds(t *testing.T) {
	t.Parallel()
	db := opstest.DB(t, "transfers")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tid, settled, rejected := uuid.NewString(), uuid.NewString(), uuid.NewString()
	if _, err := db.Exec(t.Context(), `
INSERT INTO transferencia (id, conta_origem, conta_destino, valor_centavos, moeda, status, criada_em, atualizada_em,
                           hash_requisicao, resposta_status, resposta_corpo, cliente_id, valor_estornado_centavos)
VALUES ($1, 'CC-A', 'CC-B', 1000, 'BRL', 'LIQUIDADA', $2, $2, decode(repeat('ab', 32), 'hex'), 202, '\x7b7d', 'loja', 300)`, tid, at); err != nil {
		t.Fatal(err)
	}
	refund := func(id string, cents int, status, reason string, created time.Time) {
		t.Helper()
		if _, err := db.Exec(t.Context(), `
INSERT INTO estorno (id, transferencia_id, valor_centavos, status, motivo, cliente_id, evento_id, hash_requisicao,
                     resposta_status, resposta_corpo, criado_em, atualizado_em)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), 'loja-b', $1, decode(repeat('cd', 32), 'hex'), 202, '\x7b7d', $6::timestamptz, $6::timestamptz + interval '1 second')`,
			id, tid, cents, status, reason, created); err != nil {
			t.Fatal(err)
		}
	}
	refund(rejected, 900, "REJEITADO", "VALOR_EXCEDE_ESTORNAVEL", at.Add(2*time.Minute))
	refund(settled, 300, "LIQUIDADO", "", at.Add(time.Minute))

	ops := opstest.Serve(t, nil, opsweb.Routes(tpg.NewStore(db, nil, "", nil, 0), nil, slog.New(slog.DiscardHandler)))
	var got opsapi.Refunds
	if code := ops.Get("/ops/transferencias/"+tid+"/estornos", &got); code != http.StatusOK {
		t.Fatalf("GET refunds = %d", code)
	}
	want := opsapi.Refunds{Estornos: []opsapi.Refund{
		{ID: settled, TransferenciaID: tid, ValorEmCentavos: 300, Status: "LIQUIDADO",
			CriadoEm: opsapi.Time(at.Add(time.Minute)), AtualizadoEm: opsapi.Time(at.Add(time.Minute + time.Second))},
		{ID: rejected, TransferenciaID: tid, ValorEmCentavos: 900, Status: "REJEITADO", Motivo: "VALOR_EXCEDE_ESTORNAVEL",
			CriadoEm: opsapi.Time(at.Add(2 * time.Minute)), AtualizadoEm: opsapi.Time(at.Add(2*time.Minute + time.Second))},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refunds mismatch (-want +got):\n%s", diff)
	}
	var one opsapi.OperatorTransfer
	if code := ops.Get("/ops/transferencias/"+tid, &one); code != http.StatusOK || one.ValorEstornadoEmCentavos != 300 {
		t.Errorf("GET transfer = %d, valorEstornadoEmCentavos %d, want 300", code, one.ValorEstornadoEmCentavos)
	}
	var none opsapi.Refunds
	if code := ops.Get("/ops/transferencias/"+uuid.NewString()+"/estornos", &none); code != http.StatusOK || none.Estornos == nil || len(none.Estornos) != 0 {
		t.Errorf("GET refunds of an unknown transfer = %d %+v, want 200 and an empty list", code, none)
	}
	if code := ops.Get("/ops/transferencias/not-a-uuid/estornos", nil); code != http.StatusBadRequest {
		t.Errorf("GET refunds of a bad id = %d, want 400", code)
	}
}
