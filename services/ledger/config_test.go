package ledger_test

import (
	"testing"

	"github.com/paysuite/payments/services/ledger"
	domain "github.com/paysuite/payments/services/ledger/internal/ledger"
)

func TestLedgerOwnershipSetting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   string
		want    domain.Ownership
		wantErr bool
	}{
		{"", domain.OwnershipEnforced, false},
		{"on", domain.OwnershipEnforced, false},
		{"off", domain.OwnershipOff, false},
		{"false", 0, true},
		{"OFF", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			cfg, err := ledger.ConfigFromEnv(func(k string) string {
				return map[string]string{"DATABASE_URL": "postgres://x", "LEDGER_OWNERSHIP": tc.value,
					"AUTH_JWKS_FILE": "jwks.json", "AUTH_ISSUER": "paysuite-test"}[k]
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && cfg.Ownership != tc.want {
				t.Errorf("Ownership = %v, want %v", cfg.Ownership, tc.want)
			}
		})
	}
}
