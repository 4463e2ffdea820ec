package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
	"github.com/paysuite/payments/test/support/poll"
)

const holdBody = `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":30000,"moeda":"BRL","captura":"MANUAL"}`

// holdAt is a hold's body expiring at.
func holdAt(at string) string {
	return `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":30000,"moeda":"BRL","captura":"MANUAL","expiraEm":"` + at + `"}`
}

// TestHoldRequestValidation: captura and expiraEm are checked with the
// other fields (422 with a field error, nothing written); a valid hold is
// stored and announced with them, the default expiry 7 days on.
func TestHoldRequestValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	now := time.Now().UTC()
	base := `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":30000,"moeda":"BRL"`
	for _, tt := range []struct {
		name, body, field string
	}{
		{"unknown captura", base + `,"captura":"DEPOIS"}`, "captura"},
		{"lower-case captura", base + `,"captura":"manual"}`, "captura"},
		{"expiraEm without captura", base + `,"expiraEm":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`, "expiraEm"},
		{"expiraEm with AUTOMATICA", base + `,"captura":"AUTOMATICA","expiraEm":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`, "expiraEm"},
		{"expiraEm not RFC 3339", holdAt("amanhã"), "expiraEm"},
		{"expiraEm without zone", holdAt(now.Add(time.Hour).Format("2006-01-02T15:04:05")), "expiraEm"},
		{"expiraEm under a minute", holdAt(now.Add(30 * time.Second).Format(time.RFC3339)), "expiraEm"},
		{"expiraEm in the past", holdAt(now.Add(-time.Hour).Format(time.RFC3339)), "expiraEm"},
		{"expiraEm over 30 days", holdAt(now.Add(31 * 24 * time.Hour).Format(time.RFC3339)), "expiraEm"},
	} {
		r := h.post(t, uuid.NewString(), tt.body)
		if r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", tt.name, r.status, r.body)
			continue
		}
		if p := r.problem(t); len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
			t.Errorf("%s: field errors %+v, want one on %s", tt.name, p.Errors, tt.field)
		}
	}
	h.wantCreated(t, 0)
	if r := h.post(t, uuid.NewString(), base+`,"captura":null}`); r.status != http.StatusBadRequest {
		t.Errorf("captura null: %d, want 400", r.status)
	}

	def, explicit, auto := uuid.NewString(), uuid.NewString(), uuid.NewString()
	at := now.Add(2 * time.Hour).Truncate(time.Second)
	for key, body := range map[string]string{def: holdBody, explicit: holdAt(at.Format(time.RFC3339)), auto: base + `,"captura":"AUTOMATICA"}`} {
		if r := h.post(t, key, body); r.status != http.StatusAccepted {
			t.Fatalf("POST %s = %d %s", body, r.status, r.body)
		}
	}
	for key, want := range map[string]struct {
		capture string // in the event: absent for AUTOMATICA
		shown   string // in GET
		min     time.Time
		max     time.Time
	}{
		def:      {events.CaptureManual, events.CaptureManual, now.Add(transfer.DefaultHoldTTL - time.Minute), now.Add(transfer.DefaultHoldTTL + time.Minute)},
		explicit: {events.CaptureManual, events.CaptureManual, at, at},
		auto:     {"", events.CaptureAutomatic, time.Time{}, time.Time{}},
	} {
		var got events.Requested
		var payload []byte
		if err := h.pool.QueryRow(context.Background(), `SELECT payload FROM outbox_event WHERE aggregate_id = $1`, key).Scan(&payload); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(payload, &got); err != nil {
			t.Fatal(err)
		}
		if got.Capture != want.capture || got.ExpiresAt.Before(want.min) || got.ExpiresAt.After(want.max) {
			t.Errorf("%s: event captura %q expiraEm %v; want %q within [%v, %v]", key, got.Capture, got.ExpiresAt, want.capture, want.min, want.max)
		}
		var view map[string]any
		r := do(t, http.MethodGet, h.url+"/transferencias/"+key, nil, nil)
		if err := json.Unmarshal(r.body, &view); err != nil {
			t.Fatal(err)
		}
		var wantExpiry any // absent unless a hold
		if !got.ExpiresAt.IsZero() {
			wantExpiry = got.ExpiresAt.UTC().Format(time.RFC3339Nano)
		}
		if view["captura"] != want.shown || view["expiraEm"] != wantExpiry {
			t.Errorf("%s: GET shows captura %v expiraEm %v; want %s %v", key, view["captura"], view["expiraEm"], want.shown, wantExpiry)
		}
	}
}

// TestHoldFingerprint: captura and expiraEm are part of what a key is
// bound to; captura absent and AUTOMATICA are the same request.
func TestHoldFingerprint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	key := uuid.NewString()
	if r := h.post(t, key, validBody); r.status != http.StatusAccepted {
		t.Fatalf("POST = %d", r.status)
	}
	withAuto := `{"contaOrigem":"CC-001","contaDestino":"CC-002","valorEmCentavos":30000,"moeda":"BRL","captura":"AUTOMATICA"}`
	if r := h.post(t, key, withAuto); r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "true" {
		t.Errorf("same request with captura AUTOMATICA = %d %v, want a replay", r.status, r.header)
	}
	if r := h.post(t, key, holdBody); r.status != http.StatusUnprocessableEntity {
		t.Errorf("same key as a hold = %d, want 422", r.status)
	}
	hold := uuid.NewString()
	if r := h.post(t, hold, holdAt(at.Format(time.RFC3339))); r.status != http.StatusAccepted {
		t.Fatalf("POST hold = %d %s", r.status, r.body)
	}
	// The same instant written in another zone is the same request.
	if r := h.post(t, hold, holdAt(at.In(time.FixedZone("BRT", -3*3600)).Format(time.RFC3339))); r.header.Get(web.HeaderReplayed) != "true" {
		t.Errorf("same expiraEm in another zone = %d %v, want a replay", r.status, r.header)
	}
	for name, body := range map[string]string{"another expiraEm": holdAt(at.Add(time.Minute).Format(time.RFC3339)), "no expiraEm": holdBody, "immediate": validBody} {
		if r := h.post(t, hold, body); r.status != http.StatusUnprocessableEntity {
			t.Errorf("%s with the hold's key = %d, want 422", name, r.status)
		}
	}
	h.wantCreated(t, 2)
}

// command posts a capture (body may be nil) or a cancellation of transfer
// id with key, as client ("" the default one).
func (h *harness) command(tb testing.TB, kind, id, key, client string, body []byte) response {
	tb.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	if body != nil {
		hdr["Content-Type"] = "application/json"
	}
	if client != "" {
		hdr[headerClient] = client
	}
	return do(tb, http.MethodPost, h.url+"/transferencias/"+id+"/"+kind, hdr, body)
}

// reservedHold creates a hold of 30000 cents and moves it to RESERVADA,
// as the ledger's TransferenciaReservada would.
func (h *harness) reservedHold(tb testing.TB) string {
	tb.Helper()
	id := uuid.NewString()
	if r := h.post(tb, id, holdBody); r.status != http.StatusAccepted {
		tb.Fatalf("POST hold = %d %s", r.status, r.body)
	}
	h.apply(tb, id, transfer.Result{Status: transfer.StatusReserved})
	return id
}

func (h *harness) apply(tb testing.TB, id string, r transfer.Result) {
	tb.Helper()
	r.EventID, r.TransferID = uuid.New(), uuid.MustParse(id)
	if out, _, err := h.store.ApplyResults(context.Background(), []transfer.Result{r}); err != nil || out[0] != transfer.Moved {
		tb.Fatalf("apply %s to %s: %v %v", r.Status, id, out, err)
	}
}

// rows counts the commands and the outbox rows of transfer id other than
// its TransferenciaSolicitada.
func (h *harness) rows(tb testing.TB, id string) (commands, outboxed int) {
	tb.Helper()
	err := h.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM comando_transferencia WHERE transferencia_id = ($1::text)::uuid),
		(SELECT count(*) FROM outbox_event WHERE aggregate_id = $1::text AND event_type <> $2)`, id, events.TypeRequested).Scan(&commands, &outboxed)
	if err != nil {
		tb.Fatal(err)
	}
	return commands, outboxed
}

func wantProblem(tb testing.TB, what string, r response, status int, typ string) {
	tb.Helper()
	if r.status != status {
		tb.Errorf("%s = %d %s, want %d %s", what, r.status, r.body, status, typ)
		return
	}
	if p := r.problem(tb); p.Type != typ {
		tb.Errorf("%s: problem %s, want %s", what, p.Type, typ)
	}
}

// TestCaptureCommand: a capture of a reserved hold is accepted (202 with
// the transfer, still RESERVADA) with its CapturaSolicitada in the outbox,
// written once whatever the replays; the same key with another body, or
// for a cancellation, is 422; a second command is 409 command-in-progress
// until the result lands, then 409 transfer-not-reserved; a replay still
// answers the first response.
func TestCaptureCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.reservedHold(t)
	key := uuid.NewString()
	body := []byte(`{"valorEmCentavos":12000}`)
	first := h.command(t, "captura", id, key, "", body)
	if first.status != http.StatusAccepted || first.header.Get(web.HeaderReplayed) != "" {
		t.Fatalf("capture = %d %s, want a first 202", first.status, first.body)
	}
	var view map[string]any
	if err := json.Unmarshal(first.body, &view); err != nil || view["status"] != "RESERVADA" || view["id"] != id {
		t.Fatalf("capture body %s (%v), want the transfer, RESERVADA", first.body, err)
	}
	var ev events.CaptureRequested
	topic, msgKey, typ := h.commandEvent(t, id, &ev)
	if topic != testTopics.CaptureRequested || msgKey != "CC-001" || typ != events.TypeCaptureRequested ||
		ev.TransferID.String() != id || ev.AmountCents != 12000 || ev.ClientID != defaultClient || ev.SourceAccount != "CC-001" {
		t.Errorf("outbox row %s %s %s %+v, want CapturaSolicitada of 12000 on the capture topic keyed CC-001 by %s", topic, msgKey, typ, ev, defaultClient)
	}
	replay := h.command(t, "captura", id, key, "", []byte(`{ "valorEmCentavos" : 12000 }`))
	if replay.status != http.StatusAccepted || replay.header.Get(web.HeaderReplayed) != "true" || string(replay.body) != string(first.body) {
		t.Errorf("replay = %d %v %s, want the first 202 replayed", replay.status, replay.header, replay.body)
	}
	reused := httpapi.TypeURI(errkind.KeyReused)
	wantProblem(t, "same key, other amount", h.command(t, "captura", id, key, "", []byte(`{"valorEmCentavos":12001}`)), 422, reused)
	wantProblem(t, "same key, whole amount", h.command(t, "captura", id, key, "", nil), 422, reused)
	wantProblem(t, "same key, cancellation", h.command(t, "cancelamento", id, key, "", nil), 422, reused)
	wantProblem(t, "same key, another client", h.command(t, "captura", id, key, "client-b", body), 422, reused)
	inProgress := httpapi.TypeURI(transfer.KindCommandInProgress)
	wantProblem(t, "another capture", h.command(t, "captura", id, uuid.NewString(), "", body), 409, inProgress)
	wantProblem(t, "a cancellation", h.command(t, "cancelamento", id, uuid.NewString(), "", nil), 409, inProgress)
	if c, o := h.rows(t, id); c != 1 || o != 1 {
		t.Errorf("%d commands, %d outbox rows; want 1 and 1", c, o)
	}
	h.apply(t, id, transfer.Result{Status: transfer.StatusSettled, SettledCents: 12000})
	wantProblem(t, "a capture once LIQUIDADA", h.command(t, "captura", id, uuid.NewString(), "", body), 409, httpapi.TypeURI(transfer.KindNotReserved))
	if r := h.command(t, "captura", id, key, "", body); r.header.Get(web.HeaderReplayed) != "true" || string(r.body) != string(first.body) {
		t.Errorf("replay once LIQUIDADA = %d %s, want the first response", r.status, r.body)
	}
	check(t, do(t, http.MethodGet, h.url+"/transferencias/"+id, nil, nil), map[string]any{"id": id, "contaOrigem": "CC-001",
		"contaDestino": "CC-002", "valorEmCentavos": float64(30000), "moeda": "BRL", "status": "LIQUIDADA", "captura": "MANUAL",
		"expiraEm": view["expiraEm"], "valorLiquidadoEmCentavos": float64(12000)})
}

// TestCommandRefusals: what a command is refused with, each writing
// nothing.
func TestCommandRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	pending := uuid.NewString()
	if r := h.post(t, pending, holdBody); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	immediate := uuid.NewString()
	if r := h.post(t, immediate, validBody); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	cancelled := h.reservedHold(t)
	h.apply(t, cancelled, transfer.Result{Status: transfer.StatusCancelled})
	expired := h.reservedHold(t)
	h.apply(t, expired, transfer.Result{Status: transfer.StatusExpired})
	reserved := h.reservedHold(t)
	notReserved, validation := httpapi.TypeURI(transfer.KindNotReserved), httpapi.TypeURI(errkind.Validation)
	for _, tt := range []struct {
		name, kind, id, key, client string
		body                        []byte
		status                      int
		typ                         string
	}{
		{"capture of a hold not reserved yet", "captura", pending, uuid.NewString(), "", nil, 409, notReserved},
		{"cancellation of a hold not reserved yet", "cancelamento", pending, uuid.NewString(), "", nil, 409, notReserved},
		{"capture of an immediate transfer", "captura", immediate, uuid.NewString(), "", nil, 409, notReserved},
		{"capture of a cancelled hold", "captura", cancelled, uuid.NewString(), "", nil, 409, notReserved},
		{"cancellation of an expired hold", "cancelamento", expired, uuid.NewString(), "", nil, 409, notReserved},
		{"capture over the reservation", "captura", reserved, uuid.NewString(), "", []byte(`{"valorEmCentavos":30001}`), 422,
			httpapi.TypeURI(transfer.KindCaptureExceeds)},
		{"capture of zero", "captura", reserved, uuid.NewString(), "", []byte(`{"valorEmCentavos":0}`), 422, validation},
		{"capture of a negative amount", "captura", reserved, uuid.NewString(), "", []byte(`{"valorEmCentavos":-5}`), 422, validation},
		{"capture with a fraction", "captura", reserved, uuid.NewString(), "", []byte(`{"valorEmCentavos":1.5}`), 400, httpapi.TypeURI(errkind.Malformed)},
		{"capture with an unknown field", "captura", reserved, uuid.NewString(), "", []byte(`{"valor":5}`), 400, httpapi.TypeURI(errkind.Malformed)},
		{"cancellation with a field", "cancelamento", reserved, uuid.NewString(), "", []byte(`{"valorEmCentavos":5}`), 400, httpapi.TypeURI(errkind.Malformed)},
		{"another client's hold", "captura", reserved, uuid.NewString(), "client-b", nil, 404, httpapi.TypeURI(errkind.NotFound)},
		{"another client's cancellation", "cancelamento", reserved, uuid.NewString(), "client-b", nil, 404, httpapi.TypeURI(errkind.NotFound)},
		{"unknown transfer", "captura", uuid.NewString(), uuid.NewString(), "", nil, 404, httpapi.TypeURI(errkind.NotFound)},
		{"transfer id not a UUID", "captura", "x", uuid.NewString(), "", nil, 400, httpapi.TypeURI(errkind.InvalidID)},
		{"no key", "captura", reserved, "", "", nil, 400, httpapi.TypeURI(errkind.InvalidKey)},
	} {
		wantProblem(t, tt.name, h.command(t, tt.kind, tt.id, tt.key, tt.client, tt.body), tt.status, tt.typ)
	}
	var n int
	if err := h.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM comando_transferencia) +
		(SELECT count(*) FROM outbox_event WHERE event_type NOT IN ($1))`, events.TypeRequested).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d command or command outbox rows after refusals, %v; want 0", n, err)
	}
	// A refused key is not remembered: the corrected command takes it.
	key := uuid.NewString()
	wantProblem(t, "over the reservation", h.command(t, "captura", reserved, key, "", []byte(`{"valorEmCentavos":30001}`)), 422,
		httpapi.TypeURI(transfer.KindCaptureExceeds))
	if r := h.command(t, "captura", reserved, key, "", []byte(`{"valorEmCentavos":30000}`)); r.status != http.StatusAccepted {
		t.Errorf("corrected capture = %d %s, want 202", r.status, r.body)
	}
}

// TestCancelCommand: a cancellation without a body, or with an empty
// object, is the same command.
func TestCancelCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.reservedHold(t)
	key := uuid.NewString()
	first := h.command(t, "cancelamento", id, key, "", nil)
	if first.status != http.StatusAccepted {
		t.Fatalf("cancellation = %d %s", first.status, first.body)
	}
	if r := h.command(t, "cancelamento", id, key, "", []byte(`{}`)); r.header.Get(web.HeaderReplayed) != "true" || string(r.body) != string(first.body) {
		t.Errorf("replay with {} = %d %s, want the first response", r.status, r.body)
	}
	var ev events.CancelRequested
	topic, msgKey, typ := h.commandEvent(t, id, &ev)
	if topic != testTopics.CancelRequested || msgKey != "CC-001" || typ != events.TypeCancelRequested || ev.ClientID != defaultClient || ev.SourceAccount != "CC-001" || ev.TransferID.String() != id {
		t.Errorf("outbox row on %s: %+v", topic, ev)
	}
	if c, o := h.rows(t, id); c != 1 || o != 1 {
		t.Errorf("%d commands, %d outbox rows; want 1 and 1", c, o)
	}
}

// TestConcurrentCommands: many commands of one hold at once, each with
// its own key: exactly one is accepted, every other is 409
// command-in-progress; one command row, one outbox row.
func TestConcurrentCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.reservedHold(t)
	const n = 20
	start := make(chan struct{})
	results := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			kind := map[bool]string{true: "captura", false: "cancelamento"}[i%2 == 0]
			results[i] = h.command(t, kind, id, uuid.NewString(), "", nil)
		})
	}
	close(start)
	wg.Wait()
	accepted := 0
	for i, r := range results {
		if r.status == http.StatusAccepted {
			accepted++
			continue
		}
		wantProblem(t, fmt.Sprintf("command %d", i), r, 409, httpapi.TypeURI(transfer.KindCommandInProgress))
	}
	if accepted != 1 {
		t.Errorf("%d accepted, want 1", accepted)
	}
	if c, o := h.rows(t, id); c != 1 || o != 1 {
		t.Errorf("%d commands, %d outbox rows; want 1 and 1", c, o)
	}
}

// TestCommandInFlight: while a command's transaction is open, its key is
// 409 request-in-progress; its commit failing (the connection cut before
// it) leaves neither the command row nor its outbox row, and the same key
// is then free.
func TestCommandInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	id := h.reservedHold(t)
	key := uuid.NewString()
	hd := h.holds.hold(uuid.MustParse(id))
	first := make(chan response, 1)
	go func() { first <- h.command(t, "captura", id, key, "", nil) }()
	waitClosed(t, hd.entered, "the command to reach its commit")
	wantProblem(t, "same key in flight", h.command(t, "captura", id, key, "", nil), 409, httpapi.TypeURI(errkind.InProgress))
	var killed bool
	if err := h.pool.QueryRow(context.Background(), `
		SELECT bool_and(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the command's backend: %v %v", killed, err)
	}
	close(hd.release)
	if r := <-first; r.status != http.StatusServiceUnavailable {
		t.Errorf("the cut command = %d %s, want 503", r.status, r.body)
	}
	if c, o := h.rows(t, id); c != 0 || o != 0 {
		t.Fatalf("after the failed commit: %d commands, %d outbox rows; want neither", c, o)
	}
	// The claim goes with the cut session, once PostgreSQL has ended it.
	var r response
	poll.Until(t, 15*time.Second, "a command answered other than 409", func() (bool, string) {
		r = h.command(t, "captura", id, key, "", nil)
		return r.status != http.StatusConflict, fmt.Sprintf("%+v", r)
	})
	if r.status != http.StatusAccepted || r.header.Get(web.HeaderReplayed) != "" {
		t.Errorf("the same key after the failure = %d %s, want a first 202", r.status, r.body)
	}
	if c, o := h.rows(t, id); c != 1 || o != 1 {
		t.Errorf("%d commands, %d outbox rows; want 1 and 1", c, o)
	}
}

// commandEvent reads the one outbox row of transfer id other than its
// TransferenciaSolicitada: its topic, key and type, its payload into ev.
func (h *harness) commandEvent(tb testing.TB, id string, ev any) (topic, key, typ string) {
	tb.Helper()
	var payload []byte
	if err := h.pool.QueryRow(context.Background(), `SELECT topic, key, event_type, payload FROM outbox_event
		WHERE aggregate_id = $1 AND event_type <> $2`, id, events.TypeRequested).Scan(&topic, &key, &typ, &payload); err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(payload, ev); err != nil {
		tb.Fatal(err)
	}
	return topic, key, typ
}
