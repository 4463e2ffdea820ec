package transfers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/services/transfers/internal/transfer"
)

// createOnly is a transfer.Store whose Create answers as told; its other
// methods are never called here.
type createOnly struct {
	transfer.Store
	create func(transfer.Creation) (*transfer.Record, error)
}

func (s createOnly) Create(_ context.Context, c transfer.Creation) (*transfer.Record, error) {
	return s.create(c)
}

func TestMeterIdempotency(t *testing.T) {
	t.Parallel()
	mine := [32]byte{1}
	other := [32]byte{2}
	tests := []struct {
		name string
		rec  *transfer.Record
		err  error
		want map[string]float64
	}{
		{"created", nil, nil, map[string]float64{"replays": 0, ConflictKeyReused: 0, ConflictInProgress: 0}},
		{"replay", &transfer.Record{Fingerprint: mine}, nil, map[string]float64{"replays": 1, ConflictKeyReused: 0, ConflictInProgress: 0}},
		{"key reused", &transfer.Record{Fingerprint: other}, nil, map[string]float64{"replays": 0, ConflictKeyReused: 1, ConflictInProgress: 0}},
		{"in progress", nil, fmt.Errorf("create: %w", transfer.ErrInProgress), map[string]float64{"replays": 0, ConflictKeyReused: 0, ConflictInProgress: 1}},
		{"database error", nil, errors.New("connection refused"), map[string]float64{"replays": 0, ConflictKeyReused: 0, ConflictInProgress: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			m := NewIdempotencyMetrics(reg)
			store := meterIdempotency(createOnly{create: func(transfer.Creation) (*transfer.Record, error) { return tc.rec, tc.err }}, m)
			rec, err := store.Create(context.Background(), transfer.Creation{Fingerprint: mine})
			if rec != tc.rec || !errors.Is(err, tc.err) {
				t.Errorf("Create = %v, %v; want the wrapped store's %v, %v", rec, err, tc.rec, tc.err)
			}
			// Every series is exposed, at zero until it happens.
			got := map[string]float64{}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
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
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("counters mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
