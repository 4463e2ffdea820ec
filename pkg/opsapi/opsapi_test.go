package opsapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/outbox/outboxtest"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
)

type env struct {
	db     *postgres.DB
	ob     *outbox.Outbox
	srv    *httptest.Server
	issuer *authtest.TestIssuer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, err := postgres.Open(t.Context(), pgtest.NewDSN(t, migrations.Platform), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	issuer := authtest.New(t)
	log := slog.New(slog.DiscardHandler)
	authn, err := auth.New(t.Context(), issuer.Config(), log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = authn.Close(context.Background()) })
	ob := outbox.New(db)
	r := httpapi.NewRouter(log, nil, prometheus.NewRegistry(), nil, authn.Middleware)
	auth.Mount(r, log, opsapi.Routes(ob, log))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &env{db: db, ob: ob, srv: srv, issuer: issuer}
}

// enqueue writes one event of aggregate agg and returns its id.
func (e *env) enqueue(t *testing.T, agg string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	err := e.db.InTx(t.Context(), func(tx pgx.Tx) error {
		return e.ob.Enqueue(t.Context(), tx, events.Message{ID: id, AggregateType: "transfer", AggregateID: agg,
			Topic: "t", Key: "k-" + agg, Type: "TransferenciaSolicitada", Payload: []byte(`{}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) do(t *testing.T, method, path, bearer string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestBacklogAndRequeue: a DEAD event shows in the backlog with its error;
// an operator requeues it once (a second request changes nothing); a token
// without operacoes, or none, changes nothing.
func TestBacklogAndRequeue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agg := uuid.NewString()
	dead := e.enqueue(t, agg)
	e.enqueue(t, uuid.NewString())
	if _, err := e.db.Exec(t.Context(), `UPDATE outbox_event SET status = 'DEAD', last_error = 'refused: too large', attempts = 12 WHERE id = $1`, dead); err != nil {
		t.Fatal(err)
	}
	op := e.issuer.Bearer(t, "ana", auth.ScopeOperations)
	client := e.issuer.Bearer(t, "cliente-a", auth.ScopeTransfersRead, auth.ScopeTransfersCreate)

	var b opsapi.Backlog
	if got := e.do(t, http.MethodGet, opsapi.PathBacklog, op, &b); got != http.StatusOK {
		t.Fatalf("GET backlog = %d", got)
	}
	if b.Pendentes != 1 || b.Mortos != 1 || len(b.EventosMortos) != 1 {
		t.Fatalf("backlog = %+v, want 1 pending, 1 dead", b)
	}
	want := opsapi.DeadEvent{ID: dead.String(), Topico: "t", Chave: "k-" + agg, Tipo: "TransferenciaSolicitada",
		Tentativas: 12, Erro: "refused: too large", EnfileiradoEm: b.EventosMortos[0].EnfileiradoEm}
	if diff := cmp.Diff(want, b.EventosMortos[0]); diff != "" {
		t.Errorf("dead event mismatch (-want +got):\n%s", diff)
	}

	var evs opsapi.Events
	if got := e.do(t, http.MethodGet, "/ops/outbox/transferencias/"+agg, op, &evs); got != http.StatusOK {
		t.Fatalf("GET events = %d", got)
	}
	if len(evs.Eventos) != 1 || evs.Eventos[0].Status != "DEAD" || evs.Eventos[0].PublicadoEm != "" {
		t.Errorf("events = %+v, want the one DEAD event", evs)
	}

	requeue := "/ops/outbox/" + dead.String() + "/reenfileirar"
	for _, tc := range []struct {
		name, bearer, path string
		want               int
	}{
		{"no token", "", requeue, http.StatusUnauthorized},
		{"client token", client, requeue, http.StatusForbidden},
		{"malformed id", op, "/ops/outbox/not-a-uuid/reenfileirar", http.StatusBadRequest},
	} {
		if got := e.do(t, http.MethodPost, tc.path, tc.bearer, nil); got != tc.want {
			t.Errorf("%s: POST = %d, want %d", tc.name, got, tc.want)
		}
	}
	if s, _ := e.ob.Stats(t.Context()); s.Dead != 1 {
		t.Fatalf("refused requests changed the outbox: %d DEAD, want 1", s.Dead)
	}

	for i, want := range []int64{1, 0} {
		var r opsapi.Requeued
		if got := e.do(t, http.MethodPost, requeue, op, &r); got != http.StatusOK {
			t.Fatalf("requeue #%d = %d", i+1, got)
		}
		if r.Reenfileirados != want {
			t.Errorf("requeue #%d moved %d, want %d", i+1, r.Reenfileirados, want)
		}
	}
	log := outboxtest.AuditLog(t, e.db, 10)
	if len(log) != 1 || log[0].Operator != "ana" || log[0].Action != "requeue" || log[0].EventID != dead {
		t.Errorf("audit = %+v, want one requeue by ana", log)
	}
}
