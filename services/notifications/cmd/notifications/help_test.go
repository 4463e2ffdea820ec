package main

import (
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/notifications"
	"github.com/paysuite/payments/test/helptest"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	helptest.ListsEveryVariable(t, run, "notifications", append(notifications.Variables(), checks...))
}

// checks are lines --help must have besides the declared variables: the
// logger's, and defaults written out here as a reader expects them.
var checks = []envconfig.Var{
	{Name: "HTTP_ADDR", Default: ":8083"}, {Name: "DATABASE_URL", Default: "(required)"}, {Name: "LOG_LEVEL", Default: "info"},
	{Name: "LOG_FORMAT"}, {Name: "OUTBOX_LEASE", Default: "30s"}, {Name: "INBOX_RETENTION", Default: "336h"},
	{Name: "SHUTDOWN_DRAIN", Default: "5s"}, {Name: "KAFKA_SASL_PASSWORD_FILE"}, {Name: "RATE_LIMIT_RPS", Default: "50"},
	{Name: "WEBHOOK_TIMEOUT", Default: "5s"}, {Name: "WEBHOOK_<NAME>_SECRET"},
}
