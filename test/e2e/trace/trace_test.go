// Package trace_test checks that one transfer yields one distributed trace
// across the services. It installs an in-memory tracer provider as the
// global one (the services trace through pkg/tracing.Tracer, which reads
// the global provider), so it lives in its own package: no other test of
// the process may run beside it.
package trace_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/test/e2e"
	"github.com/paysuite/payments/test/support/poll"
	"github.com/paysuite/payments/test/support/spantest"
)

// span is what the test compares of a recorded span: its name, kind and
// consumer group (consume spans).
type span struct {
	Name  string
	Kind  string
	Group string
}

func (s span) String() string {
	out := s.Name + " (" + s.Kind + ")"
	if s.Group != "" {
		out += " group=" + s.Group
	}
	return out
}

// TestOneTrace sends a transfer through the suite and checks that its
// handling in every service is one trace: the transfers service's HTTP
// server span and outbox enqueue, the relays' publish spans, antifraud's
// and the ledger's consume spans (and what they enqueue), and the consume
// spans of the transfers projection and of the notifications. It does so
// for a POST without a traceparent (the server span starts the trace) and
// one with a client's traceparent (the trace is the client's).
func TestOneTrace(t *testing.T) {
	rec := spantest.Record(t)

	s := e2e.NewSuite(t, e2e.Options{Partitions: 3})
	run := shortID()
	topics := s.Topics
	want := []span{
		// transfers: the request and its outbox row.
		{Name: "POST /transferencias", Kind: "server"},
		{Name: "outbox enqueue", Kind: "internal"},
		{Name: "outbox publish " + topics.Requested, Kind: "producer"},
		// antifraud: consumes the request, enqueues the analysis.
		{Name: "consume " + topics.Requested, Kind: "consumer", Group: s.Groups.Antifraud},
		{Name: "outbox enqueue", Kind: "internal"},
		{Name: "outbox publish " + topics.Analysed, Kind: "producer"},
		// ledger: consumes the analysis, enqueues the settlement.
		{Name: "consume " + topics.Analysed, Kind: "consumer", Group: s.Groups.Ledger},
		{Name: "outbox enqueue", Kind: "internal"},
		{Name: "outbox publish " + topics.Settled, Kind: "producer"},
		// transfers' projection and the notifications consume the result.
		{Name: "consume " + topics.Settled, Kind: "consumer", Group: s.Groups.Projection},
		{Name: "consume " + topics.Settled, Kind: "consumer", Group: s.Groups.Notifications},
	}
	sort.Slice(want, func(i, j int) bool { return want[i].String() < want[j].String() })

	clientTrace := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	clientSpan := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	tests := []struct {
		name        string
		traceparent string // sent with the POST
		wantTrace   trace.TraceID
		wantParent  trace.SpanID // of the server span
	}{
		{name: "no traceparent"},
		{
			name:        "client traceparent",
			traceparent: "00-" + clientTrace.String() + "-" + clientSpan.String() + "-01",
			wantTrace:   clientTrace,
			wantParent:  clientSpan,
		},
	}
	// Sequential: one transfer in the suite at a time, so that every
	// consumer fetches a batch of one record, which goes through the
	// per-record path, the one that opens a consume span.
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flow := e2e.NewFlow()
			from, to := fmt.Sprintf("T%s-%dA", run, i), fmt.Sprintf("T%s-%dB", run, i)
			flow.Fund(t, s, from, "BRL", 100_000)
			flow.Fund(t, s, to, "BRL", 0)
			key := uuid.NewString()
			req := e2e.TransferRequest{From: from, To: to, AmountCents: 12_345, Currency: "BRL"}
			flow.Add(key, req, e2e.Settled)
			seen := map[trace.SpanID]bool{}
			for _, sp := range postSpans(rec.Ended()) {
				seen[sp.SpanContext().SpanID()] = true
			}
			r, err := postWithTraceparent(s, key, req, tc.traceparent)
			if err != nil || r.StatusCode != http.StatusAccepted {
				t.Fatalf("POST /transferencias: %v %v", err, r)
			}
			flow.Check(t, s, 2*time.Minute)

			// The trace is the POST's: its server span's.
			var fresh []sdktrace.ReadOnlySpan
			for _, sp := range postSpans(rec.Ended()) {
				if !seen[sp.SpanContext().SpanID()] {
					fresh = append(fresh, sp)
				}
			}
			if len(fresh) != 1 {
				t.Fatalf("%d new server spans \"POST /transferencias\", want 1; spans: %v", len(fresh), names(rec.Ended()))
			}
			server := fresh[0]
			traceID := server.SpanContext().TraceID()
			if tc.wantTrace.IsValid() && traceID != tc.wantTrace {
				t.Errorf("server span in trace %s, want the client's %s", traceID, tc.wantTrace)
			}
			if got := server.Parent().SpanID(); got != tc.wantParent {
				t.Errorf("server span's parent %s, want %s", got, tc.wantParent)
			}

			var got []span
			var tree string
			poll.Until(t, 30*time.Second, "the transfer's spans share its trace", func() (bool, string) {
				got, tree = inTrace(rec.Ended(), traceID)
				missing := missingFrom(want, got)
				return len(missing) == 0, fmt.Sprintf("missing from trace %s:\n  %s\nrecorded in it (span <- parent):\n  %s",
					traceID, join(missing), tree)
			})
			// Nothing of it twice either: one POST, one settlement.
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("spans of trace %s mismatch (-want +got):\n%s", traceID, d)
			}
			t.Logf("trace %s (span <- parent):\n  %s", traceID, tree)
		})
	}
}

// postSpans returns the server spans of POST /transferencias.
func postSpans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.Name() == "POST /transferencias" && sp.SpanKind() == trace.SpanKindServer {
			out = append(out, sp)
		}
	}
	return out
}

// postWithTraceparent posts a transfer with a traceparent header when one
// is given.
func postWithTraceparent(s *e2e.Suite, key string, req e2e.TransferRequest, traceparent string) (*http.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Transfers.URL()+"/transferencias", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Authorization", s.A.Bearer)
	if traceparent != "" {
		r.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	return resp, nil
}

// inTrace returns the spans of trace id, sorted, and a listing of them with
// their parents' names.
func inTrace(spans []sdktrace.ReadOnlySpan, id trace.TraceID) ([]span, string) {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		if sp.SpanContext().TraceID() == id {
			byID[sp.SpanContext().SpanID()] = sp
		}
	}
	var out []span
	var lines []string
	for _, sp := range byID {
		s := span{Name: sp.Name(), Kind: sp.SpanKind().String(), Group: attr(sp.Attributes(), "messaging.consumer.group.name")}
		line := s.String()
		if p := sp.Parent(); p.IsValid() {
			if ps, ok := byID[p.SpanID()]; ok {
				line += " <- " + ps.Name()
			} else {
				line += " <- (unrecorded " + p.SpanID().String() + ")"
			}
		}
		out = append(out, s)
		lines = append(lines, line)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	sort.Strings(lines)
	return out, strings.Join(lines, "\n  ")
}

func missingFrom(want, got []span) []span {
	have := map[span]int{}
	for _, g := range got {
		have[g]++
	}
	var out []span
	for _, w := range want {
		if have[w] == 0 {
			out = append(out, w)
			continue
		}
		have[w]--
	}
	return out
}

func attr(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name()
	}
	return out
}

func join(spans []span) string {
	s := make([]string, len(spans))
	for i, sp := range spans {
		s[i] = sp.String()
	}
	return strings.Join(s, "\n  ")
}

func shortID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
