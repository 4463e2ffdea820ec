package main

import (
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/console"
	"github.com/paysuite/payments/test/support/helptest"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	helptest.ListsEveryVariable(t, run, "console", append(console.Variables(), checks...))
}

// checks are lines --help must have besides the declared variables: the
// logger's, and defaults written out here as a reader expects them.
var checks = []envconfig.Var{
	{Name: "CONSOLE_HTTP_ADDR", Default: ":8084"}, {Name: "CONSOLE_SESSION_TTL", Default: "8h"}, {Name: "AUTH_AUDIENCE", Default: "paysuite"},
	{Name: "LOG_LEVEL", Default: "info"}, {Name: "LOG_FORMAT"},
}
