package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/transfers/internal/postgres"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
	"github.com/paysuite/payments/test/support/pgtest"
)

// listing is the API with its listing, on a database of its own.
type listing struct {
	url   string
	store *postgres.Store
}

func newListing(tb testing.TB) *listing {
	tb.Helper()
	db := pg.Wrap(pgtest.NewPool(tb, migrations.ForService("transfers")...))
	store := postgres.NewStore(db, outbox.New(db), "test", nil, 0)
	key, err := testKey.DeriveKey("test listing cursor")
	if err != nil {
		tb.Fatal(err)
	}
	history, err := transfer.NewHistory(store, key)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(authedRouter(tb, log, func(r chi.Router) {
		mount(r, web.New(transfer.NewService(store, testTopics, testKey), log, testSpec).WithHistory(history))
	}))
	tb.Cleanup(srv.Close)
	return &listing{url: srv.URL, store: store}
}

// create is a transfer client created from source to dest; it returns its id.
func (l *listing) create(tb testing.TB, client, source, dest string) string {
	tb.Helper()
	id := uuid.NewString()
	h := as(client, false)
	h["Idempotency-Key"], h["Content-Type"] = id, "application/json"
	body := fmt.Sprintf(`{"contaOrigem":%q,"contaDestino":%q,"valorEmCentavos":100,"moeda":"BRL"}`, source, dest)
	if r := do(tb, http.MethodPost, l.url+"/transferencias", h, []byte(body)); r.status != http.StatusAccepted {
		tb.Fatalf("POST = %d %s", r.status, r.body)
	}
	return id
}

// settle projects the ledger's settlement of id, paid to holder.
func (l *listing) settle(tb testing.TB, id, holder string) {
	tb.Helper()
	tid := uuid.MustParse(id)
	if _, _, err := l.store.ApplyResults(context.Background(), []transfer.Result{{EventID: events.DerivedID(events.KindSettled, tid),
		TransferID: tid, Status: transfer.StatusSettled, DestHolder: holder}}); err != nil {
		tb.Fatal(err)
	}
}

// page is one answer of GET /transferencias.
type page struct {
	Itens         []map[string]any `json:"itens"`
	ProximoCursor *string          `json:"proximoCursor"`
}

func (l *listing) list(tb testing.TB, client string, op bool, query string) (response, page) {
	tb.Helper()
	r := do(tb, http.MethodGet, l.url+"/transferencias?"+query, as(client, op), nil)
	var p page
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &p); err != nil {
			tb.Fatalf("listing body %s: %v", r.body, err)
		}
	}
	return r, p
}

// all pages through a listing, limite items a page, and returns the ids.
func (l *listing) all(tb testing.TB, client string, op bool, query string, limite int) []string {
	tb.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		tb.Fatal(err)
	}
	q.Set("limite", fmt.Sprint(limite))
	var ids []string
	for {
		r, p := l.list(tb, client, op, q.Encode())
		if r.status != http.StatusOK {
			tb.Fatalf("GET /transferencias?%s = %d %s", q.Encode(), r.status, r.body)
		}
		if len(p.Itens) > limite {
			tb.Fatalf("%d items in a page of %d", len(p.Itens), limite)
		}
		for _, it := range p.Itens {
			ids = append(ids, it["id"].(string))
		}
		if p.ProximoCursor == nil {
			return ids
		}
		q = url.Values{"cursor": {*p.ProximoCursor}, "limite": {fmt.Sprint(limite)}}
	}
}

// reversed is ids newest first.
func reversed(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[len(ids)-1-i] = id
	}
	return out
}

// TestListingShowsWhatItsClientSees: a client lists, newest first, the
// transfers it created and those paid into its accounts once their
// settlement named it, each as GET /transferencias/{id} shows it, and
// nothing else; an operator lists every client's, or one client's with
// cliente; the filters narrow it.
func TestListingShowsWhatItsClientSees(t *testing.T) {
	t.Parallel()
	l := newListing(t)
	a1 := l.create(t, "client-a", "CC-A1", "CC-B1")
	b1 := l.create(t, "client-b", "CC-B1", "CC-A1") // paid to client-a
	a2 := l.create(t, "client-a", "CC-A1", "CC-A2") // to itself
	b2 := l.create(t, "client-b", "CC-B1", "CC-A1") // to client-a, not settled yet
	c1 := l.create(t, "client-c", "CC-C1", "CC-B1")
	l.settle(t, a1, "client-b")
	l.settle(t, b1, "client-a")
	l.settle(t, a2, "client-a")

	for _, tc := range []struct {
		name, client string
		op           bool
		query        string
		want         []string
	}{
		{"client-a", "client-a", false, "", reversed(a1, b1, a2)},
		{"client-b", "client-b", false, "", reversed(a1, b1, b2)},
		{"client-c", "client-c", false, "", reversed(c1)},
		{"a client with nothing", "client-d", false, "", nil},
		{"an operator", "ana", true, "", reversed(a1, b1, a2, b2, c1)},
		{"an operator, as client-a", "ana", true, "cliente=client-a", reversed(a1, b1, a2)},
		{"client-a's settled", "client-a", false, "status=LIQUIDADA", reversed(a1, b1, a2)},
		{"client-b's pending", "client-b", false, "status=PENDENTE", reversed(b2)},
		{"client-b's settled or pending", "client-b", false, "status=PENDENTE,LIQUIDADA", reversed(a1, b1, b2)},
		{"client-a's account CC-A2", "client-a", false, "conta=CC-A2", reversed(a2)},
		{"client-b's with CC-A1", "client-b", false, "conta=CC-A1", reversed(a1, b1, b2)},
		{"an operator's CC-B1", "ana", true, "conta=CC-B1", reversed(a1, b1, b2, c1)},
		{"client-a's in the future", "client-a", false, "desde=2999-01-01T00:00:00Z", nil},
		{"client-a's in the past", "client-a", false, "ate=2000-01-01T00:00:00Z", nil},
		{"client-a's in a range", "client-a", false, "desde=2000-01-01T00:00:00Z&ate=2999-01-01T00:00:00Z", reversed(a1, b1, a2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limite := range []int{1, 2, 50} {
				got := l.all(t, tc.client, tc.op, tc.query, limite)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("limite %d: listing mismatch (-want +got):\n%s", limite, diff)
				}
			}
		})
	}

	// Each item is the transfer as GET /transferencias/{id} shows it to
	// the same client.
	_, p := l.list(t, "client-a", false, "")
	for _, it := range p.Itens {
		r := do(t, http.MethodGet, l.url+"/transferencias/"+it["id"].(string), as("client-a", false), nil)
		var want map[string]any
		if err := json.Unmarshal(r.body, &want); err != nil || r.status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", it["id"], r.status, r.body)
		}
		if diff := cmp.Diff(want, it); diff != "" {
			t.Errorf("item differs from its GET (-get +item):\n%s", diff)
		}
	}
	// An empty listing is an empty list, not null.
	if r := do(t, http.MethodGet, l.url+"/transferencias", as("client-d", false), nil); string(r.body) != `{"itens":[],"proximoCursor":null}`+"\n" {
		t.Errorf("empty listing = %s", r.body)
	}
}

// TestListingRefusesBadParameters: every malformed parameter, and a
// cursor that is not the caller's as it was given or comes with other
// filters, is a 400 problem naming the parameter, for any caller.
func TestListingRefusesBadParameters(t *testing.T) {
	t.Parallel()
	l := newListing(t)
	for range 3 {
		l.create(t, "client-a", "CC-A1", "CC-B1")
	}
	_, first := l.list(t, "client-a", false, "limite=1&status=PENDENTE")
	if first.ProximoCursor == nil {
		t.Fatal("no next page")
	}
	cursor := *first.ProximoCursor
	tampered := []byte(cursor)
	tampered[5] ^= 1
	enc, mac, _ := strings.Cut(cursor, ".")
	for _, tc := range []struct {
		name, client, query, param string
	}{
		{"limite zero", "client-a", "limite=0", "limite"},
		{"limite over 200", "client-a", "limite=201", "limite"},
		{"limite not a number", "client-a", "limite=ten", "limite"},
		{"unknown status", "client-a", "status=PAGA", "status"},
		{"empty status in a list", "client-a", "status=LIQUIDADA,", "status"},
		{"desde not a time", "client-a", "desde=yesterday", "desde"},
		{"desde empty", "client-a", "desde=", "desde"},
		{"ate empty", "client-a", "ate=", "ate"},
		{"limite empty", "client-a", "limite=", "limite"},
		{"conta empty", "client-a", "conta=", "conta"},
		{"ate without a zone", "client-a", "ate=2026-11-29T22:00:00", "ate"},
		{"ate before desde", "client-a", "desde=2026-11-29T22:00:00Z&ate=2026-11-29T21:00:00Z", "ate"},
		{"ate equal to desde", "client-a", "desde=2026-11-29T22:00:00Z&ate=2026-11-29T22:00:00Z", "ate"},
		{"conta of a bad shape", "client-a", "conta=CC%2F1", "conta"},
		{"cliente from a client", "client-a", "cliente=client-b", "cliente"},
		{"a misspelt filter", "client-a", "stauts=LIQUIDADA", "stauts"},
		{"a filter twice", "client-a", "status=LIQUIDADA&status=PENDENTE", "status"},
		{"a made-up cursor", "client-a", "cursor=abc", "cursor"},
		{"a tampered cursor", "client-a", "cursor=" + url.QueryEscape(string(tampered)), "cursor"},
		{"a cursor without its mac", "client-a", "cursor=" + enc, "cursor"},
		{"a cursor with another's mac", "client-a", "cursor=" + enc + "." + mac[1:], "cursor"},
		{"another client's cursor", "client-b", "cursor=" + url.QueryEscape(cursor), "cursor"},
		{"an operator with a client's cursor", "ana", "cursor=" + url.QueryEscape(cursor), "cursor"},
		{"a cursor with other filters", "client-a", "cursor=" + url.QueryEscape(cursor) + "&status=LIQUIDADA", "cursor"},
		{"a cursor with some of its filters and more", "client-a", "cursor=" + url.QueryEscape(cursor) + "&status=PENDENTE&conta=CC-A1", "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := l.list(t, tc.client, tc.client == "ana", tc.query)
			if r.status != http.StatusBadRequest {
				t.Fatalf("GET ?%s = %d %s, want 400", tc.query, r.status, r.body)
			}
			p := r.problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.param {
				t.Errorf("problem %+v, want one error naming %s", p, tc.param)
			}
		})
	}
	// The cursor alone, or with exactly its filters, goes on.
	for _, q := range []string{"cursor=" + url.QueryEscape(cursor), "cursor=" + url.QueryEscape(cursor) + "&status=PENDENTE&limite=2"} {
		if r, p := l.list(t, "client-a", false, q); r.status != http.StatusOK || len(p.Itens) != 2 {
			t.Errorf("GET ?%s = %d %s, want the 2 older transfers", q, r.status, r.body)
		}
	}
}

// TestListingPagesWhileTransfersArrive: a client pages through its
// listing, a few transfers a page, while another goroutine keeps creating
// its transfers: every transfer it had before the first page is listed,
// none twice, and none created after the first page was read shows up
// (they are newer than any cursor).
func TestListingPagesWhileTransfersArrive(t *testing.T) {
	t.Parallel()
	l := newListing(t)
	before := map[string]bool{}
	for range 40 {
		before[l.create(t, "client-a", "CC-A1", "CC-B1")] = true
	}
	stop, created := make(chan struct{}), make(chan struct{}, 1)
	var wg sync.WaitGroup
	var started sync.Map // id -> when its POST was sent
	body := []byte(`{"contaOrigem":"CC-A1","contaDestino":"CC-B1","valorEmCentavos":100,"moeda":"BRL"}`)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := uuid.NewString()
			started.Store(id, time.Now())
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, l.url+"/transferencias", strings.NewReader(string(body)))
			if err != nil {
				t.Error(err)
				return
			}
			for k, v := range as("client-a", false) {
				req.Header.Set(k, v)
			}
			req.Header.Set("Idempotency-Key", id)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			if res.StatusCode != http.StatusAccepted {
				t.Errorf("POST = %d", res.StatusCode)
				return
			}
			select {
			case created <- struct{}{}:
			default:
			}
		}
	}()
	<-created // the first page is read while they arrive
	seen := map[string]bool{}
	var firstRead time.Time
	q, pages, listed := "limite=3", 0, 0
	for ; ; pages++ {
		r, p := l.list(t, "client-a", false, q)
		if pages == 0 {
			firstRead = time.Now()
		}
		if r.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, r.status, r.body)
		}
		for _, it := range p.Itens {
			id := it["id"].(string)
			if seen[id] {
				t.Errorf("page %d: %s listed twice", pages, id)
			}
			seen[id] = true
			listed++
			if at, ok := started.Load(id); ok && at.(time.Time).After(firstRead) && pages > 0 {
				t.Errorf("page %d: %s, created after the first page was read, listed", pages, id)
			}
		}
		if p.ProximoCursor == nil {
			break
		}
		q = "limite=3&cursor=" + url.QueryEscape(*p.ProximoCursor)
	}
	close(stop)
	wg.Wait()
	for id := range before {
		if !seen[id] {
			t.Errorf("%s, created before the listing, was skipped", id)
		}
	}
	arrived := 0
	started.Range(func(any, any) bool { arrived++; return true })
	if arrived < 2 {
		t.Errorf("only %d transfers arrived while paging: the test shows nothing", arrived)
	}
	t.Logf("%d transfers listed in %d pages of 3 while %d arrived", listed, pages+1, arrived)
}

// TestListingRangeIsHalfOpen: desde and ate select the transfers created
// in [desde, ate), to the nanosecond a client may write: a transfer
// created at desde is listed, one created at ate is not, and a desde a
// nanosecond after a transfer's creation leaves it out.
func TestListingRangeIsHalfOpen(t *testing.T) {
	t.Parallel()
	l := newListing(t)
	ids := []string{l.create(t, "client-a", "CC-A1", "CC-B1"), l.create(t, "client-a", "CC-A1", "CC-B1"),
		l.create(t, "client-a", "CC-A1", "CC-B1")}
	created := map[string]time.Time{}
	_, p := l.list(t, "client-a", false, "")
	for _, it := range p.Itens {
		at, err := time.Parse(time.RFC3339Nano, it["criadaEm"].(string))
		if err != nil {
			t.Fatal(err)
		}
		created[it["id"].(string)] = at
	}
	first, middle, last := created[ids[0]], created[ids[1]], created[ids[2]]
	if !first.Before(middle) || !middle.Before(last) {
		t.Fatalf("creation times %v, %v, %v are not increasing", first, middle, last)
	}
	q := func(from, to time.Time) string {
		v := url.Values{}
		if !from.IsZero() {
			v.Set("desde", from.Format(time.RFC3339Nano))
		}
		if !to.IsZero() {
			v.Set("ate", to.Format(time.RFC3339Nano))
		}
		return v.Encode()
	}
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"desde at a creation includes it", middle, time.Time{}, reversed(ids[1], ids[2])},
		{"ate at a creation excludes it", time.Time{}, middle, reversed(ids[0])},
		{"both", middle, last, reversed(ids[1])},
		{"desde a nanosecond after", middle.Add(time.Nanosecond), time.Time{}, reversed(ids[2])},
		{"ate a nanosecond after", time.Time{}, middle.Add(time.Nanosecond), reversed(ids[0], ids[1])},
	} {
		if got := l.all(t, "client-a", false, q(tc.from, tc.to), 1); !cmp.Equal(tc.want, got) {
			t.Errorf("%s (?%s): %v, want %v", tc.name, q(tc.from, tc.to), got, tc.want)
		}
	}
}
