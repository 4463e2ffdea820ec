package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/notifications"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h", "help"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"notifications", arg}, func(string) string { return "" }, &out); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		lines := map[string]string{}
		for line := range strings.Lines(out.String()) {
			if f := strings.Fields(line); len(f) > 0 {
				lines[f[0]] = line
			}
		}
		for _, v := range append(notifications.Variables(), checks...) {
			line, ok := lines[v.Name]
			if !ok {
				t.Errorf("%s: no line for %s:\n%s", arg, v.Name, out.String())
				continue
			}
			if !strings.Contains(line, v.Help) || (v.Default != "" && !strings.Contains(line, " "+v.Default+" ")) {
				t.Errorf("%s: line of %s = %q, want its default %q and help %q", arg, v.Name, line, v.Default, v.Help)
			}
		}
	}
}

// checks are lines --help must have besides the declared variables: the
// logger's, and defaults written out here as a reader expects them.
var checks = []envconfig.Var{
	{Name: "HTTP_ADDR", Default: ":8083"}, {Name: "DATABASE_URL", Default: "(required)"}, {Name: "LOG_LEVEL", Default: "info"},
	{Name: "LOG_FORMAT"}, {Name: "OUTBOX_LEASE", Default: "30s"}, {Name: "INBOX_RETENTION", Default: "336h"},
	{Name: "SHUTDOWN_DRAIN", Default: "5s"}, {Name: "KAFKA_SASL_PASSWORD_FILE"}, {Name: "RATE_LIMIT_RPS", Default: "50"},
	{Name: "WEBHOOK_TIMEOUT", Default: "5s"}, {Name: "WEBHOOK_<NAME>_SECRET"},
}
