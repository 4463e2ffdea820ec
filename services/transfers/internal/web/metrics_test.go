package web_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/validate"
	"github.com/paysuite/payments/services/transfers/internal/transfer"
	"github.com/paysuite/payments/services/transfers/internal/web"
)

// counters reads the idempotency counters of reg: "replays" and one entry
// per conflict reason.
func counters(tb testing.TB, reg *prometheus.Registry) map[string]float64 {
	tb.Helper()
	got := map[string]float64{}
	fams, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := "replays"
			for _, l := range s.GetLabel() {
				key = l.GetValue()
			}
			got[key] = s.GetCounter().GetValue()
		}
	}
	return got
}

// TestIdempotencyMetricsCountSubmitsDecision: each outcome of Submit moves
// its own counter, and every series is exposed, at zero until it happens.
func TestIdempotencyMetricsCountSubmitsDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		replayed bool
		err      error
		want     map[string]float64
	}{
		{"created", false, nil, map[string]float64{"replays": 0, web.ConflictKeyReused: 0, web.ConflictInProgress: 0}},
		{"replay", true, nil, map[string]float64{"replays": 1, web.ConflictKeyReused: 0, web.ConflictInProgress: 0}},
		{"key reused", false, transfer.ErrKeyReused, map[string]float64{"replays": 0, web.ConflictKeyReused: 1, web.ConflictInProgress: 0}},
		{"in progress", false, fmt.Errorf("create: %w", transfer.ErrInProgress), map[string]float64{"replays": 0, web.ConflictKeyReused: 0, web.ConflictInProgress: 1}},
		{"invalid", false, &validate.ValidationError{}, map[string]float64{"replays": 0, web.ConflictKeyReused: 0, web.ConflictInProgress: 0}},
		{"database error", false, errors.New("connection refused"), map[string]float64{"replays": 0, web.ConflictKeyReused: 0, web.ConflictInProgress: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			web.NewIdempotencyMetrics(reg).Submitted(tc.replayed, tc.err)
			if diff := cmp.Diff(tc.want, counters(t, reg)); diff != "" {
				t.Errorf("counters mismatch (-want +got):\n%s", diff)
			}
		})
	}
	var none *web.IdempotencyMetrics
	none.Submitted(true, nil) // nil metrics count nothing, and do not panic
}

// TestAnotherClientsKeyIsNotAReplay: through the HTTP API on a real
// database, the 422 another client gets for a taken key, even with the same
// body, is a key_reused conflict and not a replay; the owner's replay is.
func TestAnotherClientsKeyIsNotAReplay(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newHarness(t, harnessOptions{idem: web.NewIdempotencyMetrics(reg)})
	key := uuid.NewString()
	steps := []struct {
		name   string
		client string
		body   string
		status int
		want   map[string]float64
	}{
		{"ana creates", "ana", validBody, http.StatusAccepted, map[string]float64{"replays": 0, web.ConflictKeyReused: 0, web.ConflictInProgress: 0}},
		{"bruno, same key and body", "bruno", validBody, http.StatusUnprocessableEntity, map[string]float64{"replays": 0, web.ConflictKeyReused: 1, web.ConflictInProgress: 0}},
		{"ana replays", "ana", validBody, http.StatusAccepted, map[string]float64{"replays": 1, web.ConflictKeyReused: 1, web.ConflictInProgress: 0}},
		{"ana, another body", "ana", strings.Replace(validBody, "30000", "30001", 1), http.StatusUnprocessableEntity, map[string]float64{"replays": 1, web.ConflictKeyReused: 2, web.ConflictInProgress: 0}},
		{"ana, a broken body", "ana", strings.Replace(validBody, "BRL", "brl", 1), http.StatusUnprocessableEntity, map[string]float64{"replays": 1, web.ConflictKeyReused: 2, web.ConflictInProgress: 0}},
	}
	for _, st := range steps {
		r := h.postAs(t, st.client, key, st.body)
		if r.status != st.status {
			t.Fatalf("%s: POST = %d %s, want %d", st.name, r.status, r.body, st.status)
		}
		if diff := cmp.Diff(st.want, counters(t, reg)); diff != "" {
			t.Errorf("%s: counters mismatch (-want +got):\n%s", st.name, diff)
		}
	}
}

// TestInFlightIsCountedAsInProgress: the 409 of a key in flight is an
// in_progress conflict.
func TestInFlightIsCountedAsInProgress(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newHarness(t, harnessOptions{idem: web.NewIdempotencyMetrics(reg)})
	key := uuid.NewString()
	done := inFlight(t, h, key)
	if r := h.post(t, key, validBody); r.status != http.StatusConflict {
		t.Fatalf("second request while in flight = %d %s, want 409", r.status, r.body)
	}
	done()
	want := map[string]float64{"replays": 0, web.ConflictKeyReused: 0, web.ConflictInProgress: 1}
	if diff := cmp.Diff(want, counters(t, reg)); diff != "" {
		t.Errorf("counters mismatch (-want +got):\n%s", diff)
	}
}
