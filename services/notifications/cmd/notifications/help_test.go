package main

import (
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/test/support/helptest"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment; the
// lines shared by every service, and this service's defaults written out
// as a reader expects them, are checked besides the declared variables.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	checks := append(helptest.ServiceVars(":8083"), envconfig.Var{Name: "WEBHOOK_TIMEOUT", Default: "5s"}, envconfig.Var{Name: "WEBHOOK_<NAME>_SECRET"})
	helptest.ListsEveryVariable(t, run, "notifications", append(notifications.Variables(), checks...))
}
