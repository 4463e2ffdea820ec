package postgres_test

import (
	"context"
	"crypto/x509"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/tlstest"
)

// TestVerifyFullThroughDatabaseURL: sslmode=verify-full with sslrootcert in
// DATABASE_URL is all a service needs for an encrypted, verified
// connection; a CA that did not sign the server's certificate, or no TLS,
// is refused.
func TestVerifyFullThroughDatabaseURL(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "postgres-test")
	srv := pgtest.StartTLS(t, ca.Server(t, "postgres", "127.0.0.1", "localhost"))
	other := tlstest.NewCA(t, "not-the-postgres-ca")

	tests := []struct {
		name, host, query string
		// wantErr is empty for a connection that must work, else a part of
		// the error.
		wantErr     string
		wantUnknown bool // the error is an x509.UnknownAuthorityError
	}{
		{name: "verify-full, the server's CA, by IP", host: "127.0.0.1", query: "sslmode=verify-full&sslrootcert=" + ca.CertFile},
		{name: "verify-full, the server's CA, by name", host: "localhost", query: "sslmode=verify-full&sslrootcert=" + ca.CertFile},
		{name: "verify-full, another CA", host: "127.0.0.1", query: "sslmode=verify-full&sslrootcert=" + other.CertFile,
			wantErr: "certificate signed by unknown authority", wantUnknown: true},
		{name: "verify-full, unreadable CA file", host: "127.0.0.1",
			query: "sslmode=verify-full&sslrootcert=" + filepath.Join(t.TempDir(), "missing.pem"), wantErr: "unable to read CA file"},
		{name: "no TLS: pg_hba accepts only hostssl", host: "127.0.0.1", query: "sslmode=disable", wantErr: "no pg_hba.conf entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db, err := postgres.Open(ctx, srv.URL(tt.host, tt.query), 2)
			if tt.wantErr != "" {
				if err == nil {
					db.Close()
					t.Fatalf("connected, want an error with %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want one with %q", err, tt.wantErr)
				}
				var unknown x509.UnknownAuthorityError
				if tt.wantUnknown && !errors.As(err, &unknown) {
					t.Errorf("err = %v (%T), want an x509.UnknownAuthorityError", err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer db.Close()
			var ssl bool
			var version string
			if err := db.Pool.QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version); err != nil {
				t.Fatal(err)
			}
			if !ssl || !strings.HasPrefix(version, "TLSv1.") {
				t.Errorf("pg_stat_ssl: ssl=%v version=%q, want TLS", ssl, version)
			}
		})
	}
}
