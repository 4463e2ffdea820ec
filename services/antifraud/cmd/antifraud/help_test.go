package main

import (
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/antifraud"
	"github.com/paysuite/payments/test/support/helptest"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment; the
// lines shared by every service, and this service's defaults written out
// as a reader expects them, are checked besides the declared variables.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	checks := append(helptest.ServiceVars(":8082"), envconfig.Var{Name: "ANTIFRAUD_BLOCK_THRESHOLD", Default: "80"}, envconfig.Var{Name: "ANTIFRAUD_VELOCITY_WINDOW", Default: "1h"})
	helptest.ListsEveryVariable(t, run, "antifraud", append(antifraud.Variables(), checks...))
}
