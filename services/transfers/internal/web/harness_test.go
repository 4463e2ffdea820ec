package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/transfers/internal/admission"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
	"github.com/paysuite/payments/test/support/pgtest"
)

const requestedTopic = "test.transferencia.solicitada"

// testTopics are the topics the handlers under test write to.
var testTopics = events.Topics{Requested: requestedTopic, CaptureRequested: "test.transferencia.captura-solicitada",
	CancelRequested: "test.transferencia.cancelamento-solicitado", RefundRequested: "test.estorno.solicitado"}

var testSpec = []byte("openapi: 3.1.0\n")

// harness is the HTTP API on a real PostgreSQL database of its own.
type harness struct {
	url   string
	pool  *pgxpool.Pool
	store *postgres.Store
	holds *holder
}

type harnessOptions struct {
	claimTimeout time.Duration
	// log is the handler's logger; nil discards.
	log *slog.Logger
	// admit, if set, builds the admission control of POST from the
	// outbox's backlog.
	admit func(admission.BacklogReader) web.Admission
	// idem, if set, counts the idempotency outcomes of POST.
	idem *web.IdempotencyMetrics
}

func newHarness(tb testing.TB, opts harnessOptions) *harness {
	tb.Helper()
	pool := pgtest.NewPool(tb, migrations.ForService("transfers")...)
	db := pg.Wrap(pool)
	holds := &holder{Outbox: outbox.New(db), keys: map[uuid.UUID]*hold{}}
	store := postgres.NewStore(db, holds, "test", nil, opts.claimTimeout)
	log := opts.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := httptest.NewServer(authedRouter(tb, log, func(r chi.Router) {
		h := web.New(transfer.NewService(store, testTopics, testKey), log, testSpec).WithIdempotencyMetrics(opts.idem)
		if opts.admit != nil {
			h.WithAdmission(opts.admit(admission.NewBacklog(db)))
		}
		mount(r, h)
	}))
	tb.Cleanup(srv.Close)
	return &harness{url: srv.URL, pool: pool, store: store, holds: holds}
}

// authedRouter is the service's router, authenticating with a test
// issuer's keys, behind a client that sends a token of client-a with every
// scope unless a request carries its own Authorization.
func authedRouter(tb testing.TB, log *slog.Logger, mount func(chi.Router)) http.Handler {
	tb.Helper()
	iss := authtest.New(tb)
	r := httpapi.NewRouter(log, nil, nil, nil, iss.Authenticator(tb).Middleware)
	mount(r)
	return authtest.WithTokenUnlessNoClient(r, iss.Bearer(tb, "client-a", authtest.AllScopes...))
}

// Test-only authentication: the headers below become the request's
// principal, as the authentication middleware does with a verified token.
const (
	// headerClient names the client: defaultClient when absent,
	// no principal at all when noClient.
	headerClient = authtest.HeaderClient
	// headerOperator "true" adds the operacoes scope.
	headerOperator = "X-Test-Operator"
	defaultClient  = "client-a"
	noClient       = authtest.NoClient
)

// asClient is the test-only middleware that puts the principal of the
// X-Test-* headers into the request context.
var asClient = authtest.AsHeaderClient(defaultClient, func(r *http.Request) []string {
	scopes := []string{auth.ScopeTransfersCreate, auth.ScopeTransfersRead, auth.ScopeTransfersRefund}
	if r.Header.Get(headerOperator) == "true" {
		scopes = append(scopes, auth.ScopeOperations)
	}
	return scopes
})

// mount mounts h's routes on r behind asClient.
func mount(r chi.Router, h *web.Handler) {
	r.Group(func(r chi.Router) {
		r.Use(asClient)
		h.Mount(r)
	})
}

// holder is the store's outbox; it holds chosen requests inside their
// transaction, after their event is enqueued (the creation's last write)
// and before the commit.
type holder struct {
	*outbox.Outbox
	mu   sync.Mutex
	keys map[uuid.UUID]*hold
}

type hold struct {
	entered chan struct{}
	release chan struct{}
}

// hold makes the next creation of id stop before its commit until release
// is closed; entered is closed once it got there.
func (h *holder) hold(id uuid.UUID) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	h.keys[id] = hd
	return hd
}

// Enqueue implements postgres.Enqueuer: the real outbox's Enqueue, then the
// hold of the transfer whose event it is, if one was asked for.
func (h *holder) Enqueue(ctx context.Context, tx pgx.Tx, msgs ...events.Message) error {
	if err := h.Outbox.Enqueue(ctx, tx, msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		if id, err := uuid.Parse(m.AggregateID); err == nil {
			h.wait(ctx, id)
		}
	}
	return nil
}

// Queue implements postgres.Enqueuer: the real outbox's Queue, then, for a
// transfer whose hold was asked for, a statement whose result, read once
// every write before it in the batch is done, waits for the release.
func (h *holder) Queue(ctx context.Context, tx pgx.Tx, b *pgx.Batch, msgs ...events.Message) error {
	if err := h.Outbox.Queue(ctx, tx, b, msgs...); err != nil {
		return err
	}
	for _, m := range msgs {
		if id, err := uuid.Parse(m.AggregateID); err == nil && h.held(id) {
			b.Queue("SELECT 1").Exec(func(pgconn.CommandTag) error {
				h.wait(ctx, id)
				return nil
			})
		}
	}
	return nil
}

func (h *holder) held(id uuid.UUID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[id] != nil
}

func (h *holder) wait(ctx context.Context, id uuid.UUID) {
	h.mu.Lock()
	hd := h.keys[id]
	delete(h.keys, id)
	h.mu.Unlock()
	if hd == nil {
		return
	}
	close(hd.entered)
	select {
	case <-hd.release:
	case <-ctx.Done():
	}
}

func waitClosed(tb testing.TB, c <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
	}
}

// response is what a request got.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(tb testing.TB) httpapi.Problem {
	tb.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type = %q, want application/problem+json (body %s)", ct, r.body)
	}
	var p httpapi.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		tb.Fatalf("problem body %q: %v", r.body, err)
	}
	return p
}

func do(tb testing.TB, method, url string, header map[string]string, body []byte) response {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func (h *harness) post(tb testing.TB, key string, body string) response {
	tb.Helper()
	hdr := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	return do(tb, http.MethodPost, h.url+"/transferencias", hdr, []byte(body))
}

// wantCreated fails tb unless n transfers and n outbox events, one each,
// are stored.
func (h *harness) wantCreated(tb testing.TB, n int) {
	tb.Helper()
	if got := h.count(tb, "transferencia"); got != n {
		tb.Errorf("%d transfers, want %d", got, n)
	}
	if got := h.count(tb, "outbox_event"); got != n {
		tb.Errorf("%d outbox events, want %d", got, n)
	}
}

func (h *harness) count(tb testing.TB, table string) int {
	tb.Helper()
	var n int
	q := map[string]string{
		"transferencia": "SELECT count(*) FROM transferencia",
		"outbox_event":  "SELECT count(*) FROM outbox_event",
	}[table]
	if err := h.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		tb.Fatalf("count %s: %v", table, err)
	}
	return n
}

const validBody = `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":30000,"moeda":"BRL"}`

func acceptedBody(id string) string { return `{"id":"` + id + `","status":"PENDENTE"}` + "\n" }

// transfersDSN is the URL of a fresh database of its own with the
// transfers migrations applied.
func transfersDSN(tb testing.TB) string {
	tb.Helper()
	return pgtest.NewDSN(tb, migrations.ForService("transfers")...)
}

// openStore opens a pool on dsn, its configuration first changed by tune
// when tune is not nil, closed when tb ends, and the transfers store on it
// with the real outbox.
func openStore(tb testing.TB, dsn string, tune func(*pgxpool.Config)) (*pgxpool.Pool, *postgres.Store) {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if tune != nil {
		tune(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	db := pg.Wrap(pool)
	return pool, postgres.NewStore(db, outbox.New(db), "test", nil, 0)
}

// benchRouter is the service's router, with its HTTP metrics, in front of
// the API on store, authenticating with authn; it logs nothing.
func benchRouter(store *postgres.Store, authn func(http.Handler) http.Handler) http.Handler {
	log := slog.New(slog.DiscardHandler)
	router := httpapi.NewRouter(log, httpapi.NewHTTPMetrics(nil), nil, nil, authn)
	web.New(transfer.NewService(store, events.DefaultTopics, testKey), log, testSpec).Mount(router)
	return router
}

// testKey signs the transfers of the tests' services.
var testKey = func() transfersig.Signer {
	k, err := transfersig.NewKey()
	if err != nil {
		panic(err)
	}
	return k
}()
