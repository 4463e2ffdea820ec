package main

import (
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/ledger"
	"github.com/paysuite/payments/test/support/helptest"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment; the
// lines shared by every service, and this service's defaults written out
// as a reader expects them, are checked besides the declared variables.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	checks := append(helptest.ServiceVars(":8081"), envconfig.Var{Name: "LEDGER_OWNERSHIP", Default: "on"}, envconfig.Var{Name: "LEDGER_BATCH_MAX", Default: "50"})
	helptest.ListsEveryVariable(t, run, "ledger", append(ledger.Variables(), checks...))
}
