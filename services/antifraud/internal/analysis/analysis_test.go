package analysis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/outbox"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/pkg/tracing"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/postgres"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
	"github.com/paysuite/payments/test/support/pgtest"
)

var topics = events.DefaultTopics

// newService builds a service on its own pool of dsn, as a separate
// instance of the service would have.
func newService(tb testing.TB, dsn string, cfg risk.Config) *analysis.Service {
	tb.Helper()
	pool := openPool(tb, dsn)
	engine, err := risk.New(cfg)
	if err != nil {
		tb.Fatalf("risk.New: %v", err)
	}
	db := pg.Wrap(pool)
	return analysis.NewService(postgres.NewStore(db, outbox.New(db)), engine, topics, nil)
}

func newDSN(tb testing.TB) string {
	tb.Helper()
	return pgtest.NewDSN(tb, migrations.ForService("antifraud")...)
}

func request(account string, amount int64, at time.Time) events.Requested {
	return events.Requested{
		EventID:       uuid.New(),
		TransferID:    uuid.New(),
		SourceAccount: account,
		DestAccount:   "CC-002",
		AmountCents:   amount,
		Currency:      "BRL",
		OccurredAt:    at,
	}
}

// outboxRow is what the relay will publish.
type outboxRow struct {
	ID      uuid.UUID
	Topic   string
	Key     string
	Type    string
	Payload map[string]any
	Headers map[string]string
}

func outboxRows(tb testing.TB, dsn string) []outboxRow {
	tb.Helper()
	ctx := context.Background()
	conn := openPool(tb, dsn)
	defer conn.Close() // now, not only when the test ends: a test reads many times
	rows, err := conn.Query(ctx, `SELECT id, topic, key, event_type, payload, headers FROM outbox_event ORDER BY seq`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.ID, &r.Topic, &r.Key, &r.Type, &r.Payload, &r.Headers); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func countDecisions(tb testing.TB, dsn string) int {
	tb.Helper()
	ctx := context.Background()
	conn := openPool(tb, dsn)
	defer conn.Close() // now, not only when the test ends: a test reads many times
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM decision`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestAnalyseEmitsOneEventPerOutcome(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		amount      int64
		traceparent string
		wantOutcome analysis.Outcome
		wantScore   int
		wantRules   []string
		wantRow     func(req events.Requested, decidedAt time.Time) outboxRow
	}{
		{
			name: "below the threshold: TransferenciaAnalisada with every input field", amount: 9_999_999,
			traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			wantOutcome: analysis.Approved, wantScore: 10, wantRules: []string{},
			wantRow: func(req events.Requested, decidedAt time.Time) outboxRow {
				id := events.DerivedID("analisada", req.TransferID)
				return outboxRow{
					ID: id, Topic: topics.Analysed, Key: "CC-001", Type: events.TypeAnalysed,
					Payload: map[string]any{
						"eventoId": id.String(), "transferenciaId": req.TransferID.String(),
						"contaOrigem": "CC-001", "contaDestino": "CC-002", "valorEmCentavos": float64(9_999_999),
						"moeda": "BRL", "scoreRisco": float64(10), "ocorridoEm": decidedAt.Format(time.RFC3339Nano),
						// Passed through unchanged: the ledger verifies it.
						"clienteId":           "ana",
						"autorizacao":         map[string]any{"chaveId": "kid-1", "assinatura": "c2lnbmF0dXJl"},
						"eventoSolicitacaoId": req.EventID.String(),
					},
					Headers: map[string]string{
						events.HeaderCorrelationID: req.TransferID.String(),
						events.HeaderTraceparent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					},
				}
			},
		},
		{
			name: "R$ 100.000,00: TransferenciaRejeitada BLOQUEADA_ANTIFRAUDE", amount: 10_000_000,
			wantOutcome: analysis.Blocked, wantScore: 95, wantRules: []string{risk.RuleHighAmount},
			wantRow: func(req events.Requested, decidedAt time.Time) outboxRow {
				id := events.DerivedID("rejeitada-antifraude", req.TransferID)
				return outboxRow{
					ID: id, Topic: topics.Rejected, Key: "CC-001", Type: events.TypeRejected,
					Payload: map[string]any{
						"eventoId": id.String(), "transferenciaId": req.TransferID.String(),
						"motivo": "BLOQUEADA_ANTIFRAUDE", "ocorridoEm": decidedAt.Format(time.RFC3339Nano),
						"eventoSolicitacaoId": req.EventID.String(),
					},
					Headers: map[string]string{events.HeaderCorrelationID: req.TransferID.String()},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dsn := newDSN(t)
			svc := newService(t, dsn, risk.DefaultConfig())
			req := request("CC-001", tt.amount, at)
			req.ClientID = "ana"
			req.Authorization = &events.Authorization{KeyID: "kid-1", Signature: "c2lnbmF0dXJl"}
			res, err := svc.Analyse(tracing.WithTraceparent(context.Background(), tt.traceparent), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Duplicate {
				t.Fatal("first delivery reported as duplicate")
			}
			d := res.Decision
			want := analysis.Decision{
				TransferID: req.TransferID, RequestEventID: req.EventID, SourceAccount: "CC-001", DestAccount: "CC-002",
				AmountCents: tt.amount, Currency: "BRL", ClientID: "ana", OccurredAt: at, Score: tt.wantScore, Threshold: 80,
				Outcome: tt.wantOutcome, Rules: tt.wantRules, EventID: tt.wantRow(req, d.DecidedAt).ID, DecidedAt: d.DecidedAt,
			}
			if diff := cmp.Diff(want, d, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decision mismatch (-want +got):\n%s", diff)
			}
			if time.Since(d.DecidedAt) > time.Minute || d.DecidedAt.Location() != time.UTC {
				t.Errorf("DecidedAt = %v, want now in UTC", d.DecidedAt)
			}
			if diff := cmp.Diff([]outboxRow{tt.wantRow(req, d.DecidedAt)}, outboxRows(t, dsn)); diff != "" {
				t.Errorf("outbox mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedeliveryGetsTheStoredDecision(t *testing.T) {
	t.Parallel()
	dsn := newDSN(t)
	ctx := context.Background()
	req := request("CC-001", 30_000, time.Now())
	first, err := newService(t, dsn, risk.DefaultConfig()).Analyse(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	// The rules changed since: the account is now blocklisted and the
	// threshold is lower. The transfer keeps its decision.
	stricter := risk.DefaultConfig()
	stricter.Blocklist = []string{"CC-001"}
	stricter.BlockThreshold = 5
	redelivery := req
	redelivery.EventID = uuid.New() // even a re-emitted request with a new event id
	again, err := newService(t, dsn, stricter).Analyse(ctx, redelivery)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate {
		t.Error("redelivery not reported as duplicate")
	}
	if diff := cmp.Diff(first.Decision, again.Decision); diff != "" {
		t.Errorf("redelivery decision mismatch (-first +redelivery):\n%s", diff)
	}
	if again.Decision.Outcome != analysis.Approved {
		t.Errorf("outcome = %s, want the stored APPROVED", again.Decision.Outcome)
	}
	if n := len(outboxRows(t, dsn)); n != 1 {
		t.Errorf("%d outbox rows, want 1", n)
	}
}

// TestConcurrentDeliveriesDecideOnce hands the same request to several
// instances (each with its own pool) at the same moment.
func TestConcurrentDeliveriesDecideOnce(t *testing.T) {
	t.Parallel()
	dsn := newDSN(t)
	const instances = 8
	svcs := make([]*analysis.Service, instances)
	for i := range svcs {
		svcs[i] = newService(t, dsn, risk.DefaultConfig())
	}
	req := request("CC-001", 30_000, time.Now())
	results := make([]analysis.Result, instances)
	errs := make([]error, instances)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range svcs {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			results[i], errs[i] = svcs[i].Analyse(context.Background(), req)
		}()
	}
	start.Done()
	done.Wait()

	fresh := 0
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		if !results[i].Duplicate {
			fresh++
		}
		if diff := cmp.Diff(results[0].Decision, results[i].Decision); diff != "" {
			t.Errorf("instance %d decision differs (-0 +%d):\n%s", i, i, diff)
		}
	}
	if fresh != 1 {
		t.Errorf("%d instances decided, want exactly 1", fresh)
	}
	if n := countDecisions(t, dsn); n != 1 {
		t.Errorf("%d decision rows, want 1", n)
	}
	rows := outboxRows(t, dsn)
	if len(rows) != 1 || rows[0].ID != events.DerivedID("analisada", req.TransferID) {
		t.Errorf("outbox rows %+v, want exactly one with the derived id", rows)
	}
}

// TestVelocityIsSerialisedPerAccount sends many transfers of one account at
// once: the per-account lock lets exactly the limit through.
func TestVelocityIsSerialisedPerAccount(t *testing.T) {
	t.Parallel()
	dsn := newDSN(t)
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 3
	const transfers = 12
	svcs := []*analysis.Service{newService(t, dsn, cfg), newService(t, dsn, cfg)}
	now := time.Now()
	var mu sync.Mutex
	outcomes := map[analysis.Outcome]int{}
	var wg sync.WaitGroup
	for i := range transfers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svcs[i%2].Analyse(context.Background(), request("CC-001", 100, now))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			outcomes[res.Decision.Outcome]++
			mu.Unlock()
			if res.Decision.Outcome == analysis.Blocked {
				if diff := cmp.Diff([]string{risk.RuleVelocityCount}, res.Decision.Rules); diff != "" {
					t.Errorf("blocked for other rules (-want +got):\n%s", diff)
				}
			}
		}()
	}
	wg.Wait()
	want := map[analysis.Outcome]int{analysis.Approved: 3, analysis.Blocked: transfers - 3}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Errorf("outcomes mismatch (-want +got):\n%s", diff)
	}
	if n := len(outboxRows(t, dsn)); n != transfers {
		t.Errorf("%d outbox rows, want %d", n, transfers)
	}
}

// TestVelocityWindow decides a sequence of transfers; each step says what
// the stored history makes of the next one.
func TestVelocityWindow(t *testing.T) {
	t.Parallel()
	// In the past, so that no step is in the future.
	t0 := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
	type step struct {
		account string
		amount  int64
		at      time.Duration // after t0
		want    analysis.Outcome
		rules   []string
	}
	tests := []struct {
		name     string
		maxCount int64
		maxCents int64
		steps    []step
	}{
		{
			name: "count limit inside and outside the window", maxCount: 2,
			steps: []step{
				{"CC-001", 100, 0, analysis.Approved, nil},
				{"CC-001", 100, 30 * time.Minute, analysis.Approved, nil},
				{"CC-001", 100, 59 * time.Minute, analysis.Blocked, []string{risk.RuleVelocityCount}},
				// Blocked transfers move no money and do not count.
				{"CC-001", 100, 61 * time.Minute, analysis.Approved, nil},
				// The window is open-ended: a transfer stamped earlier than
				// those already approved still sees them.
				{"CC-001", 100, 45 * time.Minute, analysis.Blocked, []string{risk.RuleVelocityCount}},
				// Another account has its own history.
				{"CC-777", 100, 59 * time.Minute, analysis.Approved, nil},
				// In (t0+20m, ...]: t0+30m and t0+61m.
				{"CC-001", 100, 80 * time.Minute, analysis.Blocked, []string{risk.RuleVelocityCount}},
				// In (t0+31m, ...]: t0+61m only.
				{"CC-001", 100, 91 * time.Minute, analysis.Approved, nil},
				// In (t0+1h, ...]: t0+61m and t0+91m.
				{"CC-001", 100, 2 * time.Hour, analysis.Blocked, []string{risk.RuleVelocityCount}},
				// The window excludes its start: at t0+2h01m, t0+61m is
				// out and only t0+91m remains.
				{"CC-001", 100, 121 * time.Minute, analysis.Approved, nil},
			},
		},
		{
			name: "amount limit", maxCents: 1_000,
			steps: []step{
				{"CC-001", 600, 0, analysis.Approved, nil},
				{"CC-001", 401, 10 * time.Minute, analysis.Blocked, []string{risk.RuleVelocityAmount}},
				{"CC-001", 400, 20 * time.Minute, analysis.Approved, nil},
				{"CC-001", 1, 30 * time.Minute, analysis.Blocked, []string{risk.RuleVelocityAmount}},
				{"CC-001", 600, 61 * time.Minute, analysis.Approved, nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := risk.DefaultConfig()
			cfg.VelocityWindow = time.Hour
			cfg.VelocityMaxCount, cfg.VelocityMaxCents = tt.maxCount, tt.maxCents
			svc := newService(t, newDSN(t), cfg)
			for i, s := range tt.steps {
				res, err := svc.Analyse(context.Background(), request(s.account, s.amount, t0.Add(s.at)))
				if err != nil {
					t.Fatal(err)
				}
				got := fmt.Sprintf("%s %v", res.Decision.Outcome, res.Decision.Rules)
				want := fmt.Sprintf("%s %v", s.want, append([]string{}, s.rules...))
				if got != want {
					t.Errorf("step %d (%s %d at t0+%s): got %s, want %s", i, s.account, s.amount, s.at, got, want)
				}
			}
		})
	}
}

// TestFutureTimestampCannotShrinkTheWindow: a request stamped in the future
// (clock skew) is measured from now, so it still sees the recent history.
func TestFutureTimestampCannotShrinkTheWindow(t *testing.T) {
	t.Parallel()
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 2
	cfg.VelocityWindow = time.Hour
	svc := newService(t, newDSN(t), cfg)
	now := time.Now()
	tests := []struct {
		at   time.Time
		want analysis.Outcome
	}{
		{now.Add(-10 * time.Minute), analysis.Approved},
		{now.Add(-5 * time.Minute), analysis.Approved},
		{now.Add(3 * time.Hour), analysis.Blocked},
	}
	for i, tt := range tests {
		res, err := svc.Analyse(context.Background(), request("CC-001", 100, tt.at))
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Outcome != tt.want {
			t.Errorf("transfer %d at %s: %s, want %s", i, tt.at.Sub(now), res.Decision.Outcome, tt.want)
		}
	}
}

func TestMetricsCountNewDecisionsOnly(t *testing.T) {
	t.Parallel()
	engine, err := risk.New(risk.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	db := pg.Wrap(pgtest.NewPool(t, migrations.ForService("antifraud")...))
	m := analysis.NewMetrics(nil)
	svc := analysis.NewService(postgres.NewStore(db, outbox.New(db)), engine, topics, m)
	ctx := context.Background()
	small := request("CC-001", 100, time.Now())
	big := request("CC-001", 10_000_000, time.Now())
	for _, req := range []events.Requested{small, big, small, big, big} {
		if _, err := svc.Analyse(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]float64{
		"approved":    counterValue(t, m.Decisions.WithLabelValues("APPROVED")),
		"blocked":     counterValue(t, m.Decisions.WithLabelValues("BLOCKED")),
		"high_amount": counterValue(t, m.RulesFired.WithLabelValues(risk.RuleHighAmount)),
		"velocity":    counterValue(t, m.RulesFired.WithLabelValues(risk.RuleVelocityCount)),
		"duplicates":  counterValue(t, m.Duplicates),
	}
	want := map[string]float64{"approved": 1, "blocked": 1, "high_amount": 1, "velocity": 0, "duplicates": 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics mismatch (-want +got):\n%s", diff)
	}
}

func counterValue(tb testing.TB, c prometheus.Counter) float64 {
	tb.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// openPool opens a pool on dsn, closed when the test ends.
func openPool(tb testing.TB, dsn string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}
