package console_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/services/console"
)

// TestOIDCConfigFromEnv: the CONSOLE_OIDC_* variables are all or nothing,
// the secret may come from a file, and a bad value stops the start with
// a message naming the variable.
func TestOIDCConfigFromEnv(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"AUTH_JWKS_FILE": "/jwks.json", "AUTH_ISSUER": "https://issuer.example"}
	full := map[string]string{
		"CONSOLE_OIDC_ISSUER":        "https://id.example/realms/ops",
		"CONSOLE_OIDC_CLIENT_ID":     "console",
		"CONSOLE_OIDC_CLIENT_SECRET": "s3cret",
		"CONSOLE_OIDC_REDIRECT_URL":  "https://console.example/oidc/callback",
	}
	with := func(extra map[string]string, drop ...string) map[string]string {
		m := map[string]string{}
		for _, src := range []map[string]string{base, full, extra} {
			for k, v := range src {
				m[k] = v
			}
		}
		for _, k := range drop {
			delete(m, k)
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    console.OIDCConfig
		wantErr []string
	}{
		{name: "none set: pasted tokens only", env: base},
		{name: "all set", env: with(nil), want: console.OIDCConfig{Issuer: "https://id.example/realms/ops", ClientID: "console",
			ClientSecret: "s3cret", RedirectURL: "https://console.example/oidc/callback", Scopes: []string{"openid"}, Name: "id.example"}},
		{name: "scopes and name", env: with(map[string]string{"CONSOLE_OIDC_SCOPES": "operacoes, openid profile", "CONSOLE_OIDC_NAME": "Keycloak"}),
			want: console.OIDCConfig{Issuer: "https://id.example/realms/ops", ClientID: "console", ClientSecret: "s3cret",
				RedirectURL: "https://console.example/oidc/callback", ScopeList: "operacoes, openid profile",
				Scopes: []string{"openid", "operacoes", "profile"}, Name: "Keycloak"}},
		{name: "secret from a file", env: with(map[string]string{"CONSOLE_OIDC_CLIENT_SECRET_FILE": secretFile}, "CONSOLE_OIDC_CLIENT_SECRET"),
			want: console.OIDCConfig{Issuer: "https://id.example/realms/ops", ClientID: "console", ClientSecret: "from-file",
				ClientSecretFile: secretFile, RedirectURL: "https://console.example/oidc/callback", Scopes: []string{"openid"}, Name: "id.example"}},
		{name: "partly set", env: with(nil, "CONSOLE_OIDC_CLIENT_ID", "CONSOLE_OIDC_CLIENT_SECRET"),
			wantErr: []string{"partly configured", "CONSOLE_OIDC_CLIENT_ID, CONSOLE_OIDC_CLIENT_SECRET missing"}},
		{name: "only the issuer", env: with(nil, "CONSOLE_OIDC_CLIENT_ID", "CONSOLE_OIDC_CLIENT_SECRET", "CONSOLE_OIDC_REDIRECT_URL"),
			wantErr: []string{"CONSOLE_OIDC_CLIENT_ID, CONSOLE_OIDC_CLIENT_SECRET, CONSOLE_OIDC_REDIRECT_URL missing"}},
		{name: "scopes without the rest", env: map[string]string{"AUTH_JWKS_FILE": "/j", "AUTH_ISSUER": "i", "CONSOLE_OIDC_SCOPES": "openid"},
			wantErr: []string{"CONSOLE_OIDC_SCOPES or CONSOLE_OIDC_NAME is set"}},
		{name: "secret and its file", env: with(map[string]string{"CONSOLE_OIDC_CLIENT_SECRET_FILE": secretFile}),
			wantErr: []string{"CONSOLE_OIDC_CLIENT_SECRET and CONSOLE_OIDC_CLIENT_SECRET_FILE are both set"}},
		{name: "secret file missing", env: with(map[string]string{"CONSOLE_OIDC_CLIENT_SECRET_FILE": "/nonexistent/secret"}, "CONSOLE_OIDC_CLIENT_SECRET"),
			wantErr: []string{"CONSOLE_OIDC_CLIENT_SECRET_FILE"}},
		{name: "issuer not a URL", env: with(map[string]string{"CONSOLE_OIDC_ISSUER": "id.example"}),
			wantErr: []string{"CONSOLE_OIDC_ISSUER", "not an http(s) URL"}},
		{name: "redirect elsewhere than the callback", env: with(map[string]string{"CONSOLE_OIDC_REDIRECT_URL": "https://console.example/callback"}),
			wantErr: []string{"CONSOLE_OIDC_REDIRECT_URL", "/oidc/callback"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := console.ConfigFromEnv(func(k string) string { return tc.env[k] })
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want one saying %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "from-file") {
					t.Errorf("error %q shows the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.OIDC); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if cfg.OIDC.Enabled() != (tc.want.Issuer != "") {
				t.Errorf("Enabled = %v", cfg.OIDC.Enabled())
			}
			if strings.Contains(cfg.OIDC.String(), "s3cret") || strings.Contains(cfg.OIDC.String(), "from-file") {
				t.Errorf("String() shows the secret: %s", cfg.OIDC)
			}
		})
	}
}
