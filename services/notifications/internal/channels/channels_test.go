package channels_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
				Default:  channels.Destination{URL: tt.defaultURL, Secrets: [][]byte{secret}},
				Accounts: map[string]channels.Destination{"CC-OK": {URL: srv.URL + "/ok", Secrets: [][]byte{secret}}},
				Timeout:  200 * time.Millisecond, Now: func() time.Time { return signedAt },
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

// TestWebhookSecretsPerDestination: each destination's requests verify
// with its own secrets only; during a rotation a request carries one
// signature per secret, so the old and the new key both verify it.
func TestWebhookSecretsPerDestination(t *testing.T) {
	t.Parallel()
	type got struct{ signature, body string }
	var (
		mu   sync.Mutex
		seen = map[string]got{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.URL.Path] = got{signature: r.Header.Get(webhook.HeaderSignature), body: string(body)}
		mu.Unlock()
	}))
	defer srv.Close()
	var (
		secretA   = []byte("destination-a-secret-0001")
		secretB   = []byte("destination-b-secret-0002")
		newSecret = []byte("default-new-secret-000003")
		oldSecret = []byte("default-old-secret-000004")
		signedAt  = time.Unix(1_764_453_600, 0)
	)
	w := channels.NewWebhook(channels.WebhookConfig{
		Default: channels.Destination{URL: srv.URL + "/default", Secrets: [][]byte{newSecret, oldSecret}},
		Accounts: map[string]channels.Destination{
			"CC-A": {URL: srv.URL + "/a", Secrets: [][]byte{secretA}},
			"CC-B": {URL: srv.URL + "/b", Secrets: [][]byte{secretB}},
		},
		Timeout: 5 * time.Second, Now: func() time.Time { return signedAt },
	})
	for _, account := range []string{"CC-A", "CC-B", "CC-OTHER"} {
		n := notify.Notification{EventID: uuid.New(), EventType: "TransferenciaLiquidada", TransferID: uuid.New(),
			Status: "LIQUIDADA", OccurredAt: signedAt, Account: account}
		if err := w.Send(context.Background(), n); err != nil {
			t.Fatalf("Send(%s) = %v", account, err)
		}
	}
	tests := []struct {
		path     string
		secret   []byte
		verifies bool
		v1s      int
	}{
		{"/a", secretA, true, 1},
		{"/a", secretB, false, 1},
		{"/a", newSecret, false, 1},
		{"/b", secretB, true, 1},
		{"/b", secretA, false, 1},
		{"/default", newSecret, true, 2},
		{"/default", oldSecret, true, 2},
		{"/default", secretA, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+string(tt.secret), func(t *testing.T) {
			mu.Lock()
			g := seen[tt.path]
			mu.Unlock()
			if n := strings.Count(g.signature, "v1="); n != tt.v1s {
				t.Errorf("signature %q has %d v1 entries, want %d", g.signature, n, tt.v1s)
			}
			err := webhook.Verify(tt.secret, g.signature, []byte(g.body), signedAt, time.Minute)
			if tt.verifies && err != nil {
				t.Errorf("Verify = %v, want nil", err)
			}
			if !tt.verifies && !errors.Is(err, webhook.ErrSignatureMismatch) {
				t.Errorf("Verify = %v, want ErrSignatureMismatch", err)
			}
		})
	}
}

// A failed send's error, which the delivery log and the DLT headers keep,
// names the destination without its user info or query.
func TestWebhookErrorHidesURLCredentials(t *testing.T) {
	t.Parallel()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: the send fails to connect
	w := channels.NewWebhook(channels.WebhookConfig{
		Default: channels.Destination{URL: "http://user:pw-s3cr3t@" + addr + "/hook?token=tok-s3cr3t#frag", Secrets: [][]byte{[]byte("0123456789abcdef")}},
		Timeout: time.Second,
	})
	err = w.Send(context.Background(), notify.Notification{EventID: uuid.New(), TransferID: uuid.New(), Account: "CC-1"})
	if err == nil {
		t.Fatal("a send to a closed port succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "frag") || !strings.Contains(msg, "http://"+addr+"/hook") {
		t.Errorf("error %q: want the URL as http://%s/hook only", msg, addr)
	}
}
