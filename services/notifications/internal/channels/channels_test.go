package channels_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/paysuite/payments/services/notifications/internal/channels"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/webhook"
)

type seen struct {
	path, eventID, signature string
	body                     []byte
}

func TestWebhookSend(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		last seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = seen{path: r.URL.Path, eventID: r.Header.Get(webhook.HeaderEventID), signature: r.Header.Get(webhook.HeaderSignature), body: body}
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusAccepted)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()

	secret := []byte("0123456789abcdef")
	signedAt := time.Unix(1_764_453_600, 0)
	n := notify.Notification{
		EventID: uuid.New(), EventType: "TransferenciaRejeitada", TransferID: uuid.New(), Status: "REJEITADA",
		Reason: "SALDO_INSUFICIENTE", OccurredAt: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC),
	}
	tests := []struct {
		name       string
		account    string
		defaultURL string
		wantPath   string
		check      func(error) bool
	}{
		{name: "2xx delivered, account URL wins", account: "CC-OK", defaultURL: srv.URL + "/fail", wantPath: "/ok",
			check: func(err error) bool { return err == nil }},
		{name: "default URL", account: "CC-OTHER", defaultURL: srv.URL + "/ok", wantPath: "/ok",
			check: func(err error) bool { return err == nil }},
		{name: "5xx is a failure", account: "CC-OTHER", defaultURL: srv.URL + "/fail", wantPath: "/fail",
			check: func(err error) bool {
				var se *channels.StatusError
				return errors.As(err, &se) && se.Code == 500 && !errors.Is(err, notify.ErrOutcomeUnknown)
			}},
		{name: "redirect is not followed", account: "CC-OTHER", defaultURL: srv.URL + "/redirect", wantPath: "/redirect",
			check: func(err error) bool {
				var se *channels.StatusError
				return errors.As(err, &se) && se.Code == http.StatusFound
			}},
		{name: "timeout: outcome unknown", account: "CC-OTHER", defaultURL: srv.URL + "/slow", wantPath: "/slow",
			check: func(err error) bool { return errors.Is(err, notify.ErrOutcomeUnknown) }},
		{name: "no destination", account: "CC-OTHER", check: func(err error) bool { return errors.Is(err, notify.ErrNoDestination) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := channels.NewWebhook(channels.WebhookConfig{
				DefaultURL: tt.defaultURL, URLs: map[string]string{"CC-OK": srv.URL + "/ok"},
				Secret: secret, Timeout: 200 * time.Millisecond, Now: func() time.Time { return signedAt },
			})
			mu.Lock()
			last = seen{}
			mu.Unlock()
			n := n
			n.Account = tt.account
			err := w.Send(context.Background(), n)
			if !tt.check(err) {
				t.Fatalf("Send() = %v", err)
			}
			mu.Lock()
			got := last
			mu.Unlock()
			if got.path != tt.wantPath {
				t.Fatalf("request path = %q, want %q", got.path, tt.wantPath)
			}
			if tt.wantPath == "" {
				return
			}
			if got.eventID != n.EventID.String() {
				t.Errorf("event id header = %q, want %s", got.eventID, n.EventID)
			}
			if err := webhook.Verify(secret, got.signature, got.body, signedAt, time.Minute); err != nil {
				t.Errorf("signature does not verify: %v", err)
			}
			var p webhook.Payload
			if err := json.Unmarshal(got.body, &p); err != nil {
				t.Fatal(err)
			}
			want := webhook.Payload{EventID: n.EventID.String(), Type: n.EventType, TransferID: n.TransferID.String(),
				Status: "REJEITADA", Reason: "SALDO_INSUFICIENTE", OccurredAt: n.OccurredAt}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("payload mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
