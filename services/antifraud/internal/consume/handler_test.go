package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/tracing"
	"github.com/paysuite/payments/services/antifraud/internal/analysis"
	"github.com/paysuite/payments/services/antifraud/internal/consume"
)

// fakeAnalyser records what it was given (the trace context its events
// would carry: the request's own, else its ctx's) and answers with analyse.
type fakeAnalyser struct {
	analyse func(req events.Requested, traceparent string) (analysis.Result, error)
	calls   int
}

func (f *fakeAnalyser) AnalyseBatch(ctx context.Context, reqs []analysis.Request) ([]analysis.Result, error) {
	f.calls++
	rs := make([]analysis.Result, len(reqs))
	for i, r := range reqs {
		tp := r.Traceparent
		if tp == "" {
			tp = tracing.Traceparent(ctx)
		}
		var err error
		if rs[i], err = f.analyse(r.Transfer, tp); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

func TestHandler(t *testing.T) {
	req := events.Requested{
		EventID: uuid.New(), TransferID: uuid.New(), SourceAccount: "CC-001", DestAccount: "CC-002",
		AmountCents: 100, Currency: "BRL", OccurredAt: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC),
	}
	valid, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dbDown := errors.New("connection refused")
	const (
		ctxTrace   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		otherTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	tests := []struct {
		name          string
		value         []byte
		headers       map[string]string
		analyseErr    error
		wantCalls     int
		wantPermanent bool
		wantErr       error
		wantTrace     string
	}{
		// The trace context comes in ctx (the consumer loop's span of the
		// record), never from the header.
		{name: "valid, traced in ctx", value: valid, wantCalls: 1,
			headers:   map[string]string{events.HeaderEventType: events.TypeRequested, events.HeaderTraceparent: otherTrace},
			wantTrace: ctxTrace},
		{name: "valid, no headers", value: valid, wantCalls: 1},
		{name: "not JSON", value: []byte("{"), wantPermanent: true, wantErr: events.ErrMalformed},
		{name: "missing field", value: []byte(`{"eventoId":"` + uuid.NewString() + `"}`), wantPermanent: true, wantErr: events.ErrMalformed},
		{name: "other event type", value: valid, headers: map[string]string{events.HeaderEventType: events.TypeSettled},
			wantPermanent: true},
		{name: "database failure is retried, not dead-lettered", value: valid, analyseErr: dbDown, wantCalls: 1,
			wantErr: dbDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotReq events.Requested
			var gotTrace string
			f := &fakeAnalyser{analyse: func(r events.Requested, tp string) (analysis.Result, error) {
				gotReq, gotTrace = r, tp
				return analysis.Result{Decision: analysis.Decision{TransferID: r.TransferID}}, tt.analyseErr
			}}
			m := broker.Record{Topic: "solicitada", Value: tt.value}
			for k, v := range tt.headers {
				m.Headers = append(m.Headers, broker.Header{Key: k, Value: []byte(v)})
			}
			ctx := context.Background()
			if tt.wantTrace != "" {
				ctx = tracing.WithTraceparent(ctx, tt.wantTrace)
			}
			err := consume.NewHandler(f, slog.New(slog.DiscardHandler))(ctx, []broker.Record{m})

			if got := consumer.IsPermanent(err); got != tt.wantPermanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, got, tt.wantPermanent)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && !tt.wantPermanent && err != nil {
				t.Errorf("unexpected error %v", err)
			}
			if f.calls != tt.wantCalls {
				t.Fatalf("Analyse called %d times, want %d", f.calls, tt.wantCalls)
			}
			if tt.wantCalls > 0 {
				if diff := cmp.Diff(req, gotReq); diff != "" {
					t.Errorf("request mismatch (-want +got):\n%s", diff)
				}
				if gotTrace != tt.wantTrace {
					t.Errorf("traceparent %q, want %q", gotTrace, tt.wantTrace)
				}
			}
		})
	}
}
