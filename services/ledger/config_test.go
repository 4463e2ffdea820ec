package ledger_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
					"AUTH_JWKS_FILE": "jwks.json", "AUTH_ISSUER": "paysuite-test", "LEDGER_AUTHORIZATION_JWKS_FILE": "transfer-jwks.json"}[k]
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

// Every bad value is reported at once, each naming its variable, with no
// made-up problem from a field left at zero (LEDGER_BATCH_MAX's range).
func TestLedgerBadValues(t *testing.T) {
	t.Parallel()
	_, err := ledger.ConfigFromEnv(func(k string) string {
		return map[string]string{"LEDGER_BATCH_MAX": "many", "LEDGER_OWNERSHIP": "maybe", "OUTBOX_LEASE": "long",
			"AUTH_JWKS_FILE": "jwks.json", "AUTH_ISSUER": "paysuite-test", "LEDGER_AUTHORIZATION_JWKS_FILE": "transfer-jwks.json"}[k]
	})
	want := []string{
		"invalid configuration: DATABASE_URL is required",
		`OUTBOX_LEASE: "long" is not a duration`,
		`LEDGER_BATCH_MAX: "many" is not an integer`,
		`LEDGER_OWNERSHIP: "maybe" is neither "on" nor "off"`,
	}
	if err == nil {
		t.Fatal("ConfigFromEnv accepted bad values")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
}

func ledgerConfig(env map[string]string) (ledger.Config, error) {
	return ledger.ConfigFromEnv(func(k string) string { return env[k] })
}
