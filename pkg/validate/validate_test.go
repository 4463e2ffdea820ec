package validate_test

import (
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/validate"
)

func TestRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
		want bool
	}{
		{"account: letters, digits, dot, underscore, dash", validate.AccountID("CC-001.a_b"), true},
		{"account: 32 characters", validate.AccountID(strings.Repeat("a", 32)), true},
		{"account: 33 characters", validate.AccountID(strings.Repeat("a", 33)), false},
		{"account: empty", validate.AccountID(""), false},
		{"account: space", validate.AccountID("CC 001"), false},
		{"account: non-ASCII", validate.AccountID("contaçã"), false},
		{"currency: BRL", validate.Currency("BRL"), true},
		{"currency: lower case", validate.Currency("brl"), false},
		{"currency: four letters", validate.Currency("BRLX"), false},
		{"currency: digits", validate.Currency("B1L"), false},
		{"amount: 1", validate.AmountCents(1), true},
		{"amount: 10^15", validate.AmountCents(1_000_000_000_000_000), true},
		{"amount: 10^15 + 1", validate.AmountCents(1_000_000_000_000_001), false},
		{"amount: 0", validate.AmountCents(0), false},
		{"amount: negative", validate.AmountCents(-5), false},
	}
	for _, tt := range tests {
		if tt.ok != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.ok, tt.want)
		}
	}
}

func TestValidationErrorNamesEveryField(t *testing.T) {
	t.Parallel()
	err := &validate.ValidationError{Fields: []errkind.FieldError{{Field: "moeda", Message: validate.CurrencyRule}, {Field: "valorEmCentavos", Message: validate.AmountRule}}}
	want := "invalid request: moeda: " + validate.CurrencyRule + "; valorEmCentavos: " + validate.AmountRule
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
