package broker_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/test/support/tlstest"
)

const secretPassword = "s3cr3t-p4ssw0rd-never-printed" //nolint:gosec // a test's secret

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestSecurityFromEnvBadInput: every problem is reported at once, each
// naming its variable and never a value (no password, no path).
func TestSecurityFromEnvBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not-a-ca.pem")
	if err := os.WriteFile(notPEM, []byte("this is not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing-ca.pem")
	ca := tlstest.NewCA(t, "bad-input")
	client := ca.Client(t, "client")
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{
			name: "unsupported mechanism and a CA that is not PEM",
			env: map[string]string{
				"KAFKA_SASL_MECHANISM": "GSSAPI", "KAFKA_SASL_USERNAME": "ledger", "KAFKA_SASL_PASSWORD": secretPassword,
				"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": notPEM,
			},
			want: []string{
				"KAFKA_SASL_MECHANISM: unsupported mechanism (want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)",
				"KAFKA_TLS_CA_FILE: the file holds no PEM certificate",
			},
		},
		{
			name: "missing password and an unreadable CA file",
			env: map[string]string{
				"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "ledger",
				"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": missing,
			},
			want: []string{
				"KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE is required with KAFKA_SASL_MECHANISM",
				"KAFKA_TLS_CA_FILE: cannot read the file: no such file or directory",
			},
		},
		{
			name: "missing user, unreadable password file, KAFKA_TLS not a boolean",
			env: map[string]string{
				"KAFKA_SASL_MECHANISM": "scram-sha-256", "KAFKA_SASL_PASSWORD_FILE": missing, "KAFKA_TLS": "yes please",
			},
			want: []string{
				`KAFKA_TLS: "yes please" is not a boolean`,
				"KAFKA_SASL_PASSWORD_FILE: cannot read the file: no such file or directory",
				"KAFKA_SASL_USERNAME is required with KAFKA_SASL_MECHANISM",
			},
		},
		{
			name: "credentials without a mechanism, CA without TLS: never a silent plaintext",
			env: map[string]string{
				"KAFKA_SASL_USERNAME": "ledger", "KAFKA_SASL_PASSWORD": secretPassword, "KAFKA_TLS_CA_FILE": ca.CertFile,
			},
			want: []string{
				"KAFKA_SASL_MECHANISM is unset but a SASL username or password is set: set the mechanism (SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)",
				"KAFKA_TLS_CA_FILE is set but KAFKA_TLS is not true",
			},
		},
		{
			name: "PLAIN without TLS, password twice",
			env: map[string]string{
				"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "ledger",
				"KAFKA_SASL_PASSWORD": secretPassword, "KAFKA_SASL_PASSWORD_FILE": missing,
			},
			want: []string{
				"KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE are both set: set one",
				"KAFKA_SASL_PASSWORD_FILE: cannot read the file: no such file or directory",
				"KAFKA_SASL_MECHANISM=PLAIN sends the password in clear: it needs KAFKA_TLS=true",
			},
		},
		{
			name: "client certificate without key, key that does not match",
			env: map[string]string{
				"KAFKA_TLS": "true", "KAFKA_TLS_CERT_FILE": client.CertFile,
			},
			want: []string{"KAFKA_TLS_CERT_FILE is set without KAFKA_TLS_KEY_FILE"},
		},
		{
			name: "client key pair that is not PEM",
			env: map[string]string{
				"KAFKA_TLS": "true", "KAFKA_TLS_CERT_FILE": notPEM, "KAFKA_TLS_KEY_FILE": client.KeyFile,
			},
			want: []string{"KAFKA_TLS_CERT_FILE/KAFKA_TLS_KEY_FILE: not a PEM certificate and matching key"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := broker.SecurityFromEnv(envOf(tt.env))
			if err == nil {
				t.Fatal("SecurityFromEnv accepted a bad configuration")
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
			for _, secret := range []string{secretPassword, dir} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a value (%q): %v", secret, err)
				}
			}
		})
	}
}

func TestSecurityFromEnv(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "good-input")
	client := ca.Client(t, "client")
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(secretPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type summary struct {
		SASL            string
		TLS, RootCAs    bool
		ClientCertCount int
	}
	tests := []struct {
		name string
		env  map[string]string
		want summary
	}{
		{"nothing: plaintext, no credential", nil, summary{SASL: "none"}},
		{"SCRAM-SHA-512 with a password file", map[string]string{
			"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "ledger", "KAFKA_SASL_PASSWORD_FILE": pwFile,
		}, summary{SASL: "SCRAM-SHA-512 as ledger"}},
		{"SCRAM-SHA-256 over TLS with the system roots", map[string]string{
			"KAFKA_SASL_MECHANISM": "SCRAM-SHA-256", "KAFKA_SASL_USERNAME": "ledger", "KAFKA_SASL_PASSWORD": secretPassword,
			"KAFKA_TLS": "true",
		}, summary{SASL: "SCRAM-SHA-256 as ledger", TLS: true}},
		{"PLAIN over TLS with a CA and a client certificate", map[string]string{
			"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "ledger", "KAFKA_SASL_PASSWORD": secretPassword,
			"KAFKA_TLS": "true", "KAFKA_TLS_CA_FILE": ca.CertFile,
			"KAFKA_TLS_CERT_FILE": client.CertFile, "KAFKA_TLS_KEY_FILE": client.KeyFile,
		}, summary{SASL: "PLAIN as ledger", TLS: true, RootCAs: true, ClientCertCount: 1}},
		{"KAFKA_TLS=false with nothing else", map[string]string{"KAFKA_TLS": "false"}, summary{SASL: "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sec, err := broker.SecurityFromEnv(envOf(tt.env))
			if err != nil {
				t.Fatalf("SecurityFromEnv: %v", err)
			}
			got := summary{SASL: sec.SASL.String(), TLS: sec.TLS != nil}
			if sec.TLS != nil {
				got.RootCAs = sec.TLS.RootCAs != nil
				got.ClientCertCount = len(sec.TLS.Certificates)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("security mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSecretsNeverPrinted: a Config printed with fmt or logged with slog
// does not show the password.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	s, err := broker.NewSASL(broker.MechanismScramSHA512, "ledger", secretPassword)
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.Config{Brokers: []string{"127.0.0.1:9092"}, Security: broker.Security{SASL: s}}
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "kafka", cfg, "sasl", s)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "sasl", s)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, s), buf.String()} {
		if strings.Contains(out, secretPassword) {
			t.Errorf("the password is printed: %s", out)
		}
	}
	if !strings.Contains(buf.String(), "SCRAM-SHA-512 as ledger") {
		t.Errorf("the log does not say which credential: %s", buf.String())
	}
}

func TestNewSASLRejects(t *testing.T) {
	t.Parallel()
	_, err := broker.NewSASL("GSSAPI", "", "")
	want := []string{
		"unsupported SASL mechanism (want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)",
		"SASL username is empty",
		"SASL password is empty",
	}
	if err == nil {
		t.Fatal("NewSASL accepted an unsupported mechanism")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
