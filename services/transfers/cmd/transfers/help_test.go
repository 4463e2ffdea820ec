package main

import (
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/transfers"
	"github.com/paysuite/payments/test/support/helptest"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment; the
// lines shared by every service, and this service's defaults written out
// as a reader expects them, are checked besides the declared variables.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	checks := append(helptest.ServiceVars(":8080"), envconfig.Var{Name: "IDEMPOTENCY_CLAIM_TIMEOUT", Default: "30s"},
		envconfig.Var{Name: "INBOX_RETENTION", Default: "336h"})
	helptest.ListsEveryVariable(t, run, "transfers", append(transfers.Variables(), checks...))
}
