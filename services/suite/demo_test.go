package suite_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/auth/authtest"
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

// TestDemoHoldEndings: the scripted flow against the embedded suite on a
// real PostgreSQL and a real Kafka shows the three endings of a hold (one
// captured in part, one cancelled, one expired at its short expiraEm),
// with nothing left reserved; the two refunds of the settled transfer
// (one in part, settled, one over what remains, refused with 422
// refund-exceeds-refundable) with the balances they leave; and every other
// expectation of the demo. It lasts a little over suite.HoldExpiry: the demo waits for the expiry.
func TestDemoHoldEndings(t *testing.T) {
	issuer := authtest.New(t)
	ep, cancel, done := startSuite(t, issuer.Env())
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run after the cancel = %v, want no error", err)
		}
	}()

	var out bytes.Buffer
	d := &suite.Demo{Transfers: ep.Transfers, Ledger: ep.Ledger, Out: &out, Timeout: 2 * time.Minute,
		Token:       issuer.Token(t, suite.DemoClient, suite.DemoScopes...),
		RefundToken: issuer.Token(t, suite.DemoClient, suite.RefundScopes...),
		ReaderToken: issuer.Token(t, suite.ReaderClient, suite.ReaderScopes...),
		MinterToken: issuer.Token(t, suite.MinterClient, suite.MinterScopes...)}
	start := time.Now()
	err := d.Run(t.Context())
	t.Logf("demo ran %v:\n%s", time.Since(start).Round(time.Second), out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, ending := range []string{
		`hold captured in part \(50 of 200\)\s+LIQUIDADA\s+LIQUIDADA\s+ok`,
		`hold cancelled\s+CANCELADA\s+CANCELADA\s+ok`,
		`hold left to expire\s+EXPIRADA\s+EXPIRADA\s+ok`,
		`saldo \d+, reservado 37000, disponivel \d+ cents  ok`,
		`partial refund \(10000 cents\)\s+\S+ -> 202 PENDENTE`,
		`refund over what remains \(25000 cents\)\s+-> 422 refund-exceeds-refundable`,
		`partial refund\s+LIQUIDADO 10000 at \S+  ok`,
		`refund over what remains\s+refused \(422 refund-exceeds-refundable\), nothing written  ok`,
		`the refunded transfer\s+LIQUIDADA, valorEstornadoEmCentavos 10000 of 30000  ok`,
		`a refund as demo \(no transferencias:estornar\)\s+-> 403`,
		// A paid 300.00 and a captured 50.00, and got 100.00 back:
		// 1000 - 300 - 50 + 100; B received what A paid.
		`DEMO-\w+-A\s+75000 cents \(BRL\), reservado 0  ok`,
		`DEMO-\w+-B\s+25000 cents \(BRL\), reservado 0  ok`,
	} {
		if !regexp.MustCompile(ending).MatchString(out.String()) {
			t.Errorf("the demo's output does not show %q", ending)
		}
	}
	if time.Since(start) < suite.HoldExpiry-5*time.Second {
		t.Errorf("the demo ended %v after it started, before its hold could expire (%v)", time.Since(start), suite.HoldExpiry)
	}
}
