package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
	"github.com/paysuite/payments/test/support/poll"
)

// TestStatusTable walks every row of the table of CONTRACTS.md section 1,
// and the boundaries around them.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	type tcase struct {
		name        string
		method      string                    // default POST
		path        func(key string) string   // default /transferencias
		key         func(fresh string) string // default the fresh UUID
		contentType string                    // default application/json
		body        string
		// setup runs before the request; the returned function, if any,
		// runs after it.
		setup func(t *testing.T, h *harness, key string) func()
		want  int
		// For problems: the kind and the fields with errors.
		kind   errkind.Kind
		fields []string
		// For 202s: whether it is a replay. Their body is always checked.
		replayed bool
		// transfers is how many transfers exist afterwards.
		transfers int
	}
	fixedKey := func(k string) func(string) string { return func(string) string { return k } }
	body := func(origem, destino, valor, moeda string) string {
		return `{"contaOrigem":` + origem + `,"contaDestino":` + destino + `,"valorEmCentavos":` + valor + `,"moeda":` + moeda + `}`
	}
	created := func(t *testing.T, h *harness, key string) func() {
		t.Helper()
		if r := h.post(t, key, validBody); r.status != http.StatusAccepted {
			t.Fatalf("setup POST = %d %s", r.status, r.body)
		}
		return nil
	}
	getPath := func(key string) string { return "/transferencias/" + key }
	tests := []tcase{
		// accepted, first time
		{name: "accepted", body: validBody, want: 202, transfers: 1},
		{name: "accepted with charset", contentType: "application/json; charset=utf-8", body: validBody, want: 202, transfers: 1},
		{name: "accepted upper-case key", key: func(k string) string { return strings.ToUpper(k) }, body: validBody, want: 202, transfers: 1},
		{name: "accepted smallest amount", body: body(`"A"`, `"B"`, "1", `"USD"`), want: 202, transfers: 1},
		{name: "accepted largest amount", body: body(`"A"`, `"B"`, "1000000000000000", `"USD"`), want: 202, transfers: 1},
		{name: "accepted integral float amount", body: body(`"CC-001"`, `"CC-002"`, "30000.0", `"BRL"`), want: 202, transfers: 1},
		{name: "accepted exponent amount", body: body(`"CC-001"`, `"CC-002"`, "3e4", `"BRL"`), want: 202, transfers: 1},
		{name: "accepted other key order and spacing", body: " {\"moeda\": \"BRL\", \"valorEmCentavos\": 30000,\n \"contaDestino\": \"CC-002\", \"contaOrigem\": \"CC-001\"} ", want: 202, transfers: 1},
		// same key, same body, first finished: the first response again
		{name: "replay", body: validBody, setup: created, want: 202, replayed: true, transfers: 1},
		{name: "replay with reordered keys", body: `{"moeda":"BRL","valorEmCentavos":30000,"contaDestino":"CC-002","contaOrigem":"CC-001"}`,
			setup: created, want: 202, replayed: true, transfers: 1},
		{name: "replay with the amount spelled 3.0e4", body: body(`"CC-001"`, `"CC-002"`, "3.0e4", `"BRL"`),
			setup: created, want: 202, replayed: true, transfers: 1},
		// same key, different body
		{name: "key reused with other amount", body: body(`"CC-001"`, `"CC-002"`, "30001", `"BRL"`), setup: created,
			want: 422, kind: errkind.KeyReused, transfers: 1},
		{name: "key reused with other destination", body: body(`"CC-001"`, `"CC-003"`, "30000", `"BRL"`), setup: created,
			want: 422, kind: errkind.KeyReused, transfers: 1},
		// same key while the first is in flight
		{name: "in flight", body: validBody, setup: inFlight, want: 409, kind: errkind.InProgress, transfers: 1},
		{name: "in flight with other body", body: body(`"CC-001"`, `"CC-002"`, "5", `"BRL"`), setup: inFlight,
			want: 409, kind: errkind.InProgress, transfers: 1},
		// missing or non-UUID key
		{name: "missing key", key: fixedKey(""), body: validBody, want: 400, kind: errkind.InvalidKey},
		{name: "non-UUID key", key: fixedKey("abc"), body: validBody, want: 400, kind: errkind.InvalidKey},
		{name: "UUID without dashes", key: func(k string) string { return strings.ReplaceAll(k, "-", "") }, body: validBody,
			want: 400, kind: errkind.InvalidKey},
		{name: "URN UUID", key: func(k string) string { return "urn:uuid:" + k }, body: validBody, want: 400, kind: errkind.InvalidKey},
		{name: "nil UUID", key: fixedKey(uuid.Nil.String()), body: validBody, want: 400, kind: errkind.InvalidKey},
		// malformed JSON, wrong types, unknown fields
		{name: "malformed JSON", body: `{"contaOrigem":"CC-001",`, want: 400, kind: errkind.Malformed},
		{name: "empty body", body: ``, want: 400, kind: errkind.Malformed},
		{name: "array body", body: `[` + validBody + `]`, want: 400, kind: errkind.Malformed},
		{name: "null body", body: `null`, want: 400, kind: errkind.Malformed},
		{name: "trailing data", body: validBody + `{}`, want: 400, kind: errkind.Malformed},
		{name: "float amount", body: body(`"CC-001"`, `"CC-002"`, "300.5", `"BRL"`), want: 400, kind: errkind.Malformed, fields: []string{"valorEmCentavos"}},
		{name: "exponent fraction amount", body: body(`"CC-001"`, `"CC-002"`, "3005e-1", `"BRL"`), want: 400, kind: errkind.Malformed, fields: []string{"valorEmCentavos"}},
		{name: "string amount", body: body(`"CC-001"`, `"CC-002"`, `"30000"`, `"BRL"`), want: 400, kind: errkind.Malformed, fields: []string{"valorEmCentavos"}},
		{name: "overflowing amount", body: body(`"CC-001"`, `"CC-002"`, "9223372036854775808", `"BRL"`), want: 400, kind: errkind.Malformed, fields: []string{"valorEmCentavos"}},
		{name: "null amount", body: body(`"CC-001"`, `"CC-002"`, "null", `"BRL"`), want: 400, kind: errkind.Malformed, fields: []string{"valorEmCentavos"}},
		{name: "number account", body: body(`1`, `"CC-002"`, "30000", `"BRL"`), want: 400, kind: errkind.Malformed, fields: []string{"contaOrigem"}},
		{name: "unknown field (typo)", body: `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorCentavos":30000,"moeda":"BRL"}`,
			want: 400, kind: errkind.Malformed, fields: []string{"valorCentavos"}},
		{name: "duplicate key", body: `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":1,"moeda":"BRL","valorEmCentavos":999999}`,
			want: 400, kind: errkind.Malformed, fields: []string{"valorEmCentavos"}},
		{name: "field in other case", body: `{"contaOrigem":"CC-001","contaDestino":"CC-002","VALOREMCENTAVOS":30000,"moeda":"BRL"}`,
			want: 400, kind: errkind.Malformed, fields: []string{"VALOREMCENTAVOS"}},
		// rule violations
		{name: "same account", body: body(`"CC-001"`, `"CC-001"`, "30000", `"BRL"`), want: 422, kind: errkind.Validation, fields: []string{"contaDestino"}},
		{name: "lower-case currency", body: body(`"CC-001"`, `"CC-002"`, "30000", `"brl"`), want: 422, kind: errkind.Validation, fields: []string{"moeda"}},
		{name: "two-letter currency", body: body(`"CC-001"`, `"CC-002"`, "30000", `"BR"`), want: 422, kind: errkind.Validation, fields: []string{"moeda"}},
		{name: "zero amount", body: body(`"CC-001"`, `"CC-002"`, "0", `"BRL"`), want: 422, kind: errkind.Validation, fields: []string{"valorEmCentavos"}},
		{name: "negative amount", body: body(`"CC-001"`, `"CC-002"`, "-1", `"BRL"`), want: 422, kind: errkind.Validation, fields: []string{"valorEmCentavos"}},
		{name: "amount over 10^15", body: body(`"CC-001"`, `"CC-002"`, "1000000000000001", `"BRL"`), want: 422, kind: errkind.Validation, fields: []string{"valorEmCentavos"}},
		{name: "missing fields", body: `{}`, want: 422, kind: errkind.Validation, fields: []string{"contaOrigem", "contaDestino", "valorEmCentavos", "moeda"}},
		{name: "33-character account", body: body(`"`+strings.Repeat("a", 33)+`"`, `"CC-002"`, "30000", `"BRL"`), want: 422, kind: errkind.Validation, fields: []string{"contaOrigem"}},
		{name: "account with slash", body: body(`"CC-001"`, `"CC/002"`, "30000", `"BRL"`), want: 422, kind: errkind.Validation, fields: []string{"contaDestino"}},
		// body over 64 KiB
		{name: "body over 64 KiB", body: `{"contaOrigem":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`, want: 413, kind: errkind.TooLarge},
		// Content-Type not JSON
		{name: "text/plain", contentType: "text/plain", body: validBody, want: 415, kind: errkind.UnsupportedMedia},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: validBody, want: 415, kind: errkind.UnsupportedMedia},
		{name: "no Content-Type", contentType: "-", body: validBody, want: 415, kind: errkind.UnsupportedMedia},
		{name: "+json type", contentType: "application/vnd.api+json", body: validBody, want: 415, kind: errkind.UnsupportedMedia},
		{name: "other charset", contentType: "application/json; charset=iso-8859-1", body: validBody, want: 415, kind: errkind.UnsupportedMedia},
		{name: "braced key", key: func(k string) string { return "{" + k + "}" }, body: validBody, want: 400, kind: errkind.InvalidKey},
		// encoded path ids
		{name: "get with an escaped id", method: http.MethodGet, setup: created, want: 200, transfers: 1,
			path: func(key string) string { return "/transferencias/%" + fmt.Sprintf("%02X", key[0]) + key[1:] }},
		// GET
		{name: "get found", method: http.MethodGet, path: getPath, setup: created, want: 200, transfers: 1},
		{name: "get unknown", method: http.MethodGet, path: getPath, want: 404, kind: errkind.NotFound},
		{name: "get non-UUID", method: http.MethodGet, path: func(string) string { return "/transferencias/abc" }, want: 400, kind: errkind.InvalidID},
		{name: "get nil UUID", method: http.MethodGet, path: func(string) string { return "/transferencias/" + uuid.Nil.String() }, want: 400, kind: errkind.InvalidID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			fresh := uuid.NewString()
			key := fresh
			if tt.key != nil {
				key = tt.key(fresh)
			}
			var after func()
			if tt.setup != nil {
				after = tt.setup(t, h, fresh)
			}
			method, path := http.MethodPost, "/transferencias"
			if tt.method != "" {
				method = tt.method
			}
			if tt.path != nil {
				path = tt.path(fresh)
			}
			hdr := map[string]string{}
			switch tt.contentType {
			case "":
				hdr["Content-Type"] = "application/json"
			case "-":
			default:
				hdr["Content-Type"] = tt.contentType
			}
			if key != "" {
				hdr["Idempotency-Key"] = key
			}
			var reqBody []byte
			if method == http.MethodPost {
				reqBody = []byte(tt.body)
			}
			r := do(t, method, h.url+path, hdr, reqBody)
			if after != nil {
				after()
			}
			if r.status != tt.want {
				t.Fatalf("status = %d, want %d; body %s", r.status, tt.want, r.body)
			}
			switch {
			case tt.kind != (errkind.Kind{}):
				p := r.problem(t)
				if p.Type != httpapi.TypeURI(tt.kind) || p.Status != tt.want || p.Detail == "" {
					t.Errorf("problem = %+v, want type %s, status %d and a detail", p, httpapi.TypeURI(tt.kind), tt.want)
				}
				var got []string
				for _, f := range p.Errors {
					got = append(got, f.Field)
				}
				if diff := cmp.Diff(tt.fields, got); diff != "" {
					t.Errorf("field errors mismatch (-want +got):\n%s", diff)
				}
				if tt.want == http.StatusConflict && r.header.Get("Retry-After") == "" {
					t.Error("409 without Retry-After")
				}
			case method == http.MethodPost:
				if diff := cmp.Diff(acceptedBody(fresh), string(r.body)); diff != "" {
					t.Errorf("body mismatch (-want +got):\n%s", diff)
				}
				if got := r.header.Get("Location"); got != "/transferencias/"+fresh {
					t.Errorf("Location = %q, want /transferencias/%s", got, fresh)
				}
				replayed := r.header.Get(web.HeaderReplayed)
				if (replayed == "true") != tt.replayed || (!tt.replayed && replayed != "") {
					t.Errorf("%s = %q, want replayed %v", web.HeaderReplayed, replayed, tt.replayed)
				}
			}
			h.wantCreated(t, tt.transfers)
		})
	}
}

// TestTwoIdempotencyKeys: a request with two keys is refused whole; the
// first key is not silently taken.
func TestTwoIdempotencyKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, h.url+"/transferencias", strings.NewReader(validBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Idempotency-Key", key)
	req.Header.Add("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := response{status: res.StatusCode, header: res.Header, body: body}.problem(t)
	if res.StatusCode != http.StatusBadRequest || p.Type != httpapi.TypeURI(errkind.InvalidKey) {
		t.Errorf("got %d %+v, want 400 %s", res.StatusCode, p, httpapi.TypeURI(errkind.InvalidKey))
	}
	if n := h.count(t, "transferencia"); n != 0 {
		t.Errorf("%d transfers, want 0", n)
	}
}

// inFlight starts a first POST with key that stays inside its transaction
// until the returned function runs; that function checks the first request
// then gets its 202.
func inFlight(t *testing.T, h *harness, key string) func() {
	t.Helper()
	hd := h.holds.hold(uuid.MustParse(key))
	first := make(chan response, 1)
	go func() { first <- h.post(t, key, validBody) }()
	waitClosed(t, hd.entered, "the first request to reach its commit")
	return func() {
		close(hd.release)
		if r := <-first; r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "" {
			t.Errorf("first request = %d %s %v, want a first 202", r.status, r.body, r.header)
		}
	}
}

// TestInFlightThenReplay: while a first request is in flight a second
// gets 409; once it finished, the same request is a replay of its response.
func TestInFlightThenReplay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	done := inFlight(t, h, key)
	if r := h.post(t, key, validBody); r.status != http.StatusConflict {
		t.Fatalf("second request while in flight = %d %s, want 409", r.status, r.body)
	}
	// GET while in flight: the uncommitted transfer does not exist yet.
	if r := do(t, http.MethodGet, h.url+"/transferencias/"+key, nil, nil); r.status != http.StatusNotFound {
		t.Errorf("GET while in flight = %d, want 404", r.status)
	}
	done()
	r := h.post(t, key, validBody)
	if r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "true" || string(r.body) != acceptedBody(key) {
		t.Fatalf("after the first finished = %d %v %s, want the replayed 202", r.status, r.header, r.body)
	}
}

// TestFailedValidationIsNotRemembered: a key whose first request failed
// validation is free for a corrected request.
func TestFailedValidationIsNotRemembered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	for _, bad := range []string{
		`{"contaOrigem":"CC-001","contaDestino":"CC-001","valorEmCentavos":30000,"moeda":"BRL"}`,
		`{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":3.5,"moeda":"BRL"}`,
	} {
		if r := h.post(t, key, bad); r.status/100 != 4 {
			t.Fatalf("invalid request = %d, want 4xx", r.status)
		}
	}
	r := h.post(t, key, validBody)
	if r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "" {
		t.Fatalf("corrected request = %d %v %s, want a first 202", r.status, r.header, r.body)
	}
}

// TestConcurrentFirstRequests: 50 requests with one key at once create one
// transfer and one event; exactly one is the first 202, every other 2xx
// repeats its body, and the rest are 409s.
func TestConcurrentFirstRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	const n = 50
	start := make(chan struct{})
	results := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = h.post(t, key, validBody)
		})
	}
	close(start)
	wg.Wait()
	var firsts, replays, conflicts int
	for i, r := range results {
		switch {
		case r.status == http.StatusAccepted && r.header.Get(web.HeaderReplayed) == "":
			firsts++
		case r.status == http.StatusAccepted && r.header.Get(web.HeaderReplayed) == "true":
			replays++
		case r.status == http.StatusConflict:
			conflicts++
			if p := r.problem(t); p.Type != httpapi.TypeURI(errkind.InProgress) {
				t.Errorf("request %d: problem %s, want %s", i, p.Type, httpapi.TypeURI(errkind.InProgress))
			}
			continue
		default:
			t.Errorf("request %d = %d %s, want 202 or 409", i, r.status, r.body)
			continue
		}
		if diff := cmp.Diff(acceptedBody(key), string(r.body)); diff != "" {
			t.Errorf("request %d: 2xx body mismatch (-want +got):\n%s", i, diff)
		}
	}
	t.Logf("%d first, %d replays, %d in-flight conflicts", firsts, replays, conflicts)
	if firsts != 1 {
		t.Errorf("%d first 202s, want exactly 1", firsts)
	}
	h.wantCreated(t, 1)
}

// TestCrashedRequestFreesKey: the process holding a key dies mid
// transaction (its connection is cut); the key is free at once and a new
// request creates the one transfer.
func TestCrashedRequestFreesKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	key := uuid.NewString()
	hd := h.holds.hold(uuid.MustParse(key))
	first := make(chan response, 1)
	go func() { first <- h.post(t, key, validBody) }()
	waitClosed(t, hd.entered, "the first request to reach its commit")
	// The backend holding the key's advisory lock is the crashed process.
	var killed bool
	err := h.pool.QueryRow(context.Background(), `
		SELECT bool_and(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminate the claiming backend: %v %v", killed, err)
	}
	var r response
	poll.Until(t, 15*time.Second, "a POST answered other than 409", func() (bool, string) {
		r = h.post(t, key, validBody)
		return r.status != http.StatusConflict, fmt.Sprintf("%+v", r)
	})
	if r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "" {
		t.Fatalf("request after the crash = %d %v %s, want a first 202", r.status, r.header, r.body)
	}
	close(hd.release)
	// Its session was cut: a dependency outage, which the client retries
	// with the same key (503 with Retry-After), not an internal error.
	if r := <-first; r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("crashed request = %d %v %s, want 503 with Retry-After", r.status, r.header, r.body)
	}
	h.wantCreated(t, 1)
}

// TestStalledRequestClaimExpires: a request stalled inside its transaction
// loses its claim after the claim timeout; the key is then free.
func TestStalledRequestClaimExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{claimTimeout: time.Second})
	key := uuid.NewString()
	hd := h.holds.hold(uuid.MustParse(key))
	defer close(hd.release)
	first := make(chan response, 1)
	go func() { first <- h.post(t, key, validBody) }()
	waitClosed(t, hd.entered, "the first request to reach its commit")
	if r := h.post(t, key, validBody); r.status != http.StatusConflict {
		t.Fatalf("while the first holds its claim = %d, want 409", r.status)
	}
	var r response
	poll.Until(t, 15*time.Second, "a POST answered other than 409", func() (bool, string) {
		r = h.post(t, key, validBody)
		return r.status != http.StatusConflict, fmt.Sprintf("%+v", r)
	})
	if r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "" {
		t.Fatalf("request after the claim expired = %d %v %s, want a first 202", r.status, r.header, r.body)
	}
	if got := h.count(t, "transferencia"); got != 1 {
		t.Errorf("%d transfers, want 1", got)
	}
}

// TestGetRepresentation checks every field of GET /transferencias/{id}.
func TestGetRepresentation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	settled, rejected := uuid.NewString(), uuid.NewString()
	for _, k := range []string{settled, rejected} {
		if r := h.post(t, k, validBody); r.status != http.StatusAccepted {
			t.Fatalf("POST = %d %s", r.status, r.body)
		}
	}
	if r := do(t, http.MethodGet, h.url+"/transferencias/"+settled, nil, nil); r.status != 200 {
		t.Fatalf("GET = %d", r.status)
	} else {
		check(t, r, map[string]any{"id": settled, "contaOrigem": "CC-001", "contaDestino": "CC-002",
			"valorEmCentavos": float64(30000), "moeda": "BRL", "status": "PENDENTE", "captura": "AUTOMATICA"})
	}
	if _, _, err := h.store.ApplyResults(ctx, []transfer.Result{{EventID: uuid.New(), TransferID: uuid.MustParse(settled), Status: transfer.StatusSettled}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.store.ApplyResults(ctx, []transfer.Result{{EventID: uuid.New(), TransferID: uuid.MustParse(rejected), Status: transfer.StatusRejected, Reason: "SALDO_INSUFICIENTE"}}); err != nil {
		t.Fatal(err)
	}
	check(t, do(t, http.MethodGet, h.url+"/transferencias/"+settled, nil, nil), map[string]any{"id": settled, "contaOrigem": "CC-001",
		"contaDestino": "CC-002", "valorEmCentavos": float64(30000), "moeda": "BRL", "status": "LIQUIDADA", "captura": "AUTOMATICA"})
	check(t, do(t, http.MethodGet, h.url+"/transferencias/"+rejected, nil, nil), map[string]any{"id": rejected, "contaOrigem": "CC-001",
		"contaDestino": "CC-002", "valorEmCentavos": float64(30000), "moeda": "BRL", "status": "REJEITADA", "motivo": "SALDO_INSUFICIENTE", "captura": "AUTOMATICA"})
	// A replay still returns the first response, whatever the status now.
	if r := h.post(t, settled, validBody); string(r.body) != acceptedBody(settled) {
		t.Errorf("replay after settlement = %s, want the first response", r.body)
	}
}

// check compares a GET body with want, apart from the timestamps, which
// must be RFC 3339 in UTC with atualizadaEm >= criadaEm.
func check(t *testing.T, r response, want map[string]any) {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET = %d %s", r.status, r.header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	for _, f := range []string{"criadaEm", "atualizadaEm"} {
		s, _ := got[f].(string)
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !strings.HasSuffix(s, "Z") {
			t.Errorf("%s = %q, want RFC 3339 UTC", f, s)
		}
		times = append(times, ts)
		delete(got, f)
	}
	if times[1].Before(times[0]) {
		t.Errorf("atualizadaEm %v before criadaEm %v", times[1], times[0])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET body mismatch (-want +got):\n%s", diff)
	}
}

// fakeStore is a transfer.Store of function fields, for failures a real
// database cannot be made to produce.
type fakeStore struct {
	create func(context.Context, transfer.Creation) (*transfer.Record, error)
	get    func(context.Context, uuid.UUID) (transfer.Transfer, error)
}

func (f fakeStore) Create(ctx context.Context, c transfer.Creation) (*transfer.Record, error) {
	return f.create(ctx, c)
}
func (f fakeStore) Get(ctx context.Context, id uuid.UUID) (transfer.Transfer, error) {
	return f.get(ctx, id)
}
func (f fakeStore) Command(ctx context.Context, _, transferID uuid.UUID, _ func(transfer.Transfer) (transfer.CommandCreation, error)) (*transfer.Record, error) {
	_, err := f.create(ctx, transfer.Creation{Transfer: transfer.Transfer{ID: transferID}})
	return nil, err
}
func (f fakeStore) Refund(ctx context.Context, _, transferID uuid.UUID, _ func(transfer.Transfer, int64) (transfer.RefundCreation, error)) (*transfer.Record, error) {
	_, err := f.create(ctx, transfer.Creation{Transfer: transfer.Transfer{ID: transferID}})
	return nil, err
}
func (f fakeStore) GetRefund(ctx context.Context, id uuid.UUID) (transfer.Refund, error) {
	_, err := f.get(ctx, id)
	return transfer.Refund{}, err
}

// TestInternalErrors: a panicking handler and a failing store both give a
// 500 problem that says only "internal error".
func TestInternalErrors(t *testing.T) {
	t.Parallel()
	secret := "password=hunter2 relation transferencia"
	store := fakeStore{
		create: func(context.Context, transfer.Creation) (*transfer.Record, error) { return nil, errors.New(secret) },
		get:    func(context.Context, uuid.UUID) (transfer.Transfer, error) { panic(secret) },
	}
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(authedRouter(t, log, func(r chi.Router) {
		mount(r, web.New(transfer.NewService(store, testTopics, testKey), log, testSpec))
	}))
	defer srv.Close()
	for name, res := range map[string]response{
		"panic in GET": do(t, http.MethodGet, srv.URL+"/transferencias/"+uuid.NewString(), nil, nil),
		"store error in POST": do(t, http.MethodPost, srv.URL+"/transferencias",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": uuid.NewString()}, []byte(validBody)),
	} {
		t.Run(name, func(t *testing.T) {
			if res.status != http.StatusInternalServerError {
				t.Fatalf("status = %d, want 500", res.status)
			}
			p := res.problem(t)
			if p.Type != httpapi.TypeURI(errkind.Internal) || p.Detail != "internal error" || p.RequestID == "" {
				t.Errorf("problem = %+v, want internal-error, detail \"internal error\" and a request id", p)
			}
			if strings.Contains(string(res.body), "hunter2") {
				t.Errorf("the cause leaked to the client: %s", res.body)
			}
		})
	}
}

// TestOpenAPIServed: GET /openapi.yaml serves the document given.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(authedRouter(t, log, web.New(nil, log, testSpec).Mount))
	defer srv.Close()
	res := do(t, http.MethodGet, srv.URL+"/openapi.yaml", nil, nil)
	if res.status != 200 || res.header.Get("Content-Type") != "application/yaml" || string(res.body) != string(testSpec) {
		t.Errorf("GET /openapi.yaml = %d %q %q", res.status, res.header.Get("Content-Type"), res.body)
	}
}

// TestGetBodyIsThePublicView: GET /transferencias/{id} writes the fields
// of the public view in their wire order, and never the client or the
// request id, although both are recorded for the transfer (operators see
// them on /ops).
func TestGetBodyIsThePublicView(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := uuid.NewString()
	if r := h.post(t, id, validBody); r.status != http.StatusAccepted {
		t.Fatalf("POST = %d %s", r.status, r.body)
	}
	var client, requestID string
	if err := h.pool.QueryRow(context.Background(), `SELECT cliente_id, request_id FROM transferencia WHERE id = $1`, id).
		Scan(&client, &requestID); err != nil {
		t.Fatal(err)
	}
	if client == "" || requestID == "" {
		t.Fatalf("cliente_id %q, request_id %q: want both recorded, else this test tests nothing", client, requestID)
	}
	r := do(t, http.MethodGet, h.url+"/transferencias/"+id, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET = %d %s", r.status, r.body)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	var keys []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"id", "contaOrigem", "contaDestino", "valorEmCentavos", "moeda", "status", "captura", "criadaEm", "atualizadaEm"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("body keys, in order (-want +got):\n%s", diff)
	}
}
