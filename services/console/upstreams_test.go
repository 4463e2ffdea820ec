package console_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/paysuite/payments/services/console"
)

// TestUpstreamsOverHTTPS: the console sends the operator's token to every
// upstream, so an upstream reached over plain http from another host is
// refused at start, unless the development switch DEV_INSECURE_HTTP says
// otherwise; https, and http to the loopback, are accepted.
func TestUpstreamsOverHTTPS(t *testing.T) {
	t.Parallel()
	base := map[string]string{"AUTH_JWKS_FILE": "/j", "AUTH_ISSUER": "i"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr []string
	}{
		{name: "the defaults, on this machine", env: map[string]string{}},
		{name: "https", env: map[string]string{"CONSOLE_TRANSFERS_URL": "https://transfers.example", "CONSOLE_LEDGER_URL": "https://ledger.example:8443"}},
		{name: "loopback addresses", env: map[string]string{"CONSOLE_TRANSFERS_URL": "http://127.0.0.1:8080", "CONSOLE_LEDGER_URL": "http://[::1]:8081"}},
		{name: "plain http to other hosts", env: map[string]string{"CONSOLE_TRANSFERS_URL": "http://transfers:8080", "CONSOLE_NOTIFICATIONS_URL": "http://10.0.0.9:8083"},
			wantErr: []string{"CONSOLE_TRANSFERS_URL", "CONSOLE_NOTIFICATIONS_URL", "must be https://", "DEV_INSECURE_HTTP"}},
		{name: "plain http in development", env: map[string]string{"CONSOLE_TRANSFERS_URL": "http://transfers:8080", "DEV_INSECURE_HTTP": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := console.ConfigFromEnv(func(k string) string { return env[k] })
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatal(err)
			}
			if len(tc.wantErr) > 0 && err == nil {
				t.Fatalf("no error, want one saying %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	// Run checks a configuration built in code too.
	cfg := console.Config{HTTPAddr: "127.0.0.1:0", TransfersURL: "http://transfers:8080", LedgerURL: "https://l",
		AntifraudURL: "https://a", NotificationsURL: "https://n"}
	if err := console.Run(context.Background(), cfg, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "CONSOLE_TRANSFERS_URL") {
		t.Errorf("Run with a plain http upstream: %v, want an error naming CONSOLE_TRANSFERS_URL", err)
	}
}
