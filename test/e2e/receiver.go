package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paysuite/payments/services/notifications/webhook"
)

// Delivery is one authentic webhook request the receiver accepted.
type Delivery struct {
	At      time.Time
	Path    string
	EventID string // the signed body's eventoId (the X-Paysuite-Event-Id header agrees)
	Payload webhook.Payload
}

// Receiver is a customer's webhook endpoint: a real HTTP server that checks
// every request's signature with webhook.VerifyPayload, answers 204 to authentic
// ones and records them, and answers 401 (recording the reason) to anything
// else.
type Receiver struct {
	srv    *httptest.Server
	secret []byte

	mu         sync.Mutex
	deliveries []Delivery
	rejected   []string
}

// NewReceiver starts a receiver checking signatures with secret; it is
// closed when the test ends.
func NewReceiver(tb testing.TB, secret []byte) *Receiver {
	tb.Helper()
	r := &Receiver{secret: secret}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		r.reject(w, fmt.Sprintf("read body: %v", err))
		return
	}
	if req.Method != http.MethodPost {
		r.reject(w, "method "+req.Method)
		return
	}
	// The event id to rely on is the signed body's (VerifyPayload); the
	// header must agree with it.
	p, err := webhook.VerifyPayload(r.secret, req.Header.Get(webhook.HeaderSignature), body, time.Now(), webhook.DefaultTolerance)
	if err != nil {
		r.reject(w, fmt.Sprintf("event %s: %v", req.Header.Get(webhook.HeaderEventID), err))
		return
	}
	id := req.Header.Get(webhook.HeaderEventID)
	if id == "" || id != p.EventID {
		r.reject(w, fmt.Sprintf("header event id %q, body eventoId %q", id, p.EventID))
		return
	}
	r.mu.Lock()
	r.deliveries = append(r.deliveries, Delivery{At: time.Now(), Path: req.URL.Path, EventID: id, Payload: p})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) reject(w http.ResponseWriter, why string) {
	r.mu.Lock()
	r.rejected = append(r.rejected, why)
	r.mu.Unlock()
	w.WriteHeader(http.StatusUnauthorized)
}

// URL is the receiver's base URL.
func (r *Receiver) URL() string { return r.srv.URL }

// Deliveries returns every accepted delivery, in arrival order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}

// Of returns the deliveries about one transfer.
func (r *Receiver) Of(transferID string) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Delivery
	for _, d := range r.deliveries {
		if d.Payload.TransferID == transferID {
			out = append(out, d)
		}
	}
	return out
}

// ByTransfer groups the deliveries by transfer id.
func (r *Receiver) ByTransfer() map[string][]Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]Delivery{}
	for _, d := range r.deliveries {
		out[d.Payload.TransferID] = append(out[d.Payload.TransferID], d)
	}
	return out
}

// Rejected returns why each refused request was refused (bad signature,
// stale timestamp, mismatched event id...). A correct sender has none.
func (r *Receiver) Rejected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rejected...)
}
