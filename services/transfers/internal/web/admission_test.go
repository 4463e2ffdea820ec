package web_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/admission"
	"github.com/paysuite/payments/services/transfers/internal/web"
)

// admitted builds a harness whose POST sits behind admission control on
// the real outbox's backlog, with a frozen clock (a client's fair share
// does not refill between requests), and returns its controller.
func admitted(t *testing.T) (*harness, *admission.Controller) {
	t.Helper()
	frozen := time.Now()
	var ctrl *admission.Controller
	h := newHarness(t, harnessOptions{admit: func(b admission.BacklogReader) web.Admission {
		ctrl = admission.New(admission.Config{MaxAge: 2 * time.Second}, b, func() time.Time { return frozen }, nil)
		return ctrl
	}})
	return h, ctrl
}

// rowCounts counts the rows of every table of the service's database:
// what a POST could write.
func (h *harness) rowCounts(tb testing.TB) map[string]int {
	tb.Helper()
	ctx := context.Background()
	rows, err := h.pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
 WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		tb.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			tb.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	counts := map[string]int{}
	for _, table := range tables {
		var n int
		// table names come from the catalog, quoted by quote_ident.
		if err := h.pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			tb.Fatalf("count %s: %v", table, err)
		}
		counts[table] = n
	}
	if _, ok := counts["transferencia"]; !ok {
		tb.Fatalf("no transferencia table among %v", tables)
	}
	return counts
}

func (h *harness) refresh(tb testing.TB, c *admission.Controller) {
	tb.Helper()
	if err := c.Refresh(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// Under the bound a POST is accepted; past it (the oldest unpublished
// outbox event older than ADMISSION_MAX_OUTBOX_AGE) a POST beyond the
// client's share is answered 503 overloaded with a Retry-After of at least
// the backlog's age, and writes nothing in any table; a GET is still
// answered.
func TestShedPostWritesNothingAndReadsAreServed(t *testing.T) {
	t.Parallel()
	h, ctrl := admitted(t)
	first := uuid.NewString()
	h.refresh(t, ctrl)
	if res := h.post(t, first, validBody); res.status != http.StatusAccepted {
		t.Fatalf("under the bound: POST = %d %s, want 202", res.status, res.body)
	}
	if _, err := h.pool.Exec(context.Background(), `UPDATE outbox_event SET enqueued_at = now() - interval '10 seconds'`); err != nil {
		t.Fatal(err)
	}
	h.refresh(t, ctrl)

	shed := 0
	for range 5 {
		before := h.rowCounts(t)
		res := h.post(t, uuid.NewString(), validBody)
		if res.status == http.StatusAccepted {
			continue // the client's share, at most its burst of one
		}
		shed++
		if res.status != http.StatusServiceUnavailable {
			t.Fatalf("past the bound: POST = %d %s, want 503", res.status, res.body)
		}
		if p := res.problem(t); p.Type != httpapi.TypeURI(errkind.Overloaded) || p.Status != http.StatusServiceUnavailable {
			t.Errorf("problem %+v: want type %s", p, httpapi.TypeURI(errkind.Overloaded))
		}
		secs, err := strconv.Atoi(res.header.Get("Retry-After"))
		if err != nil || secs < 10 || secs > 16 {
			t.Errorf("Retry-After %q for a backlog of 10s: want 10 to 16 seconds", res.header.Get("Retry-After"))
		}
		if diff := cmp.Diff(before, h.rowCounts(t)); diff != "" {
			t.Errorf("a shed POST wrote rows (-before +after):\n%s", diff)
		}
	}
	if shed < 4 {
		t.Fatalf("past the bound, %d of 5 POSTs shed", shed)
	}
	if res := do(t, http.MethodGet, h.url+"/transferencias/"+first, nil, nil); res.status != http.StatusOK {
		t.Fatalf("while shedding: GET = %d %s, want 200", res.status, res.body)
	}
}

// Through the router, while shedding, a client sending ten times what
// another sends does not crowd it out: each gets its share.
func TestShedFairlyThroughTheRouter(t *testing.T) {
	t.Parallel()
	h, ctrl := admitted(t)
	if res := h.postAs(t, "light", uuid.NewString(), validBody); res.status != http.StatusAccepted {
		t.Fatalf("POST = %d %s", res.status, res.body)
	}
	if _, err := h.pool.Exec(context.Background(), `UPDATE outbox_event SET enqueued_at = now() - interval '10 seconds'`); err != nil {
		t.Fatal(err)
	}
	h.refresh(t, ctrl)
	got := map[string]int{}
	for range 2 {
		for _, client := range []string{"light", "heavy", "heavy", "heavy", "heavy", "heavy", "heavy", "heavy", "heavy", "heavy", "heavy"} {
			if res := h.postAs(t, client, uuid.NewString(), validBody); res.status == http.StatusAccepted {
				got[client]++
			}
		}
	}
	// The frozen clock refills nobody: each client gets its burst of one.
	if diff := cmp.Diff(map[string]int{"light": 1, "heavy": 1}, got); diff != "" {
		t.Errorf("admitted per client (-want +got):\n%s", diff)
	}
}
