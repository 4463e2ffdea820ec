package suite_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/paysuite/payments/services/suite"
)

// TestDemoHint: the closing hint shows how to get a token and sends a
// transfer between two accounts the demo opened (not made-up ones).
func TestDemoHint(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	d := &suite.Demo{Transfers: "http://localhost:8080", Ledger: "http://localhost:8081", From: "DEMO-ABC123-A", To: "DEMO-ABC123-B"}
	d.Hint(&out)
	for _, want := range []string{
		"TOKEN=$(go run ./services/suite/cmd/payments auth token --client demo --scopes contas:admin,contas:ler,transferencias:criar,transferencias:ler)",
		`-H "Authorization: Bearer $TOKEN"`,
		`"contaOrigem":"DEMO-ABC123-A","contaDestino":"DEMO-ABC123-B"`,
		"http://localhost:8081/contas/DEMO-ABC123-A",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("hint does not contain %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "CC-00") {
		t.Errorf("hint names accounts the demo never opened:\n%s", out.String())
	}
}
