package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/console"
)

// --help lists every variable the service reads, from its declaration,
// with its default and description, without reading the environment.
func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h", "help"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"console", arg}, func(string) string { return "" }, &out); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		lines := map[string]string{}
		for line := range strings.Lines(out.String()) {
			if f := strings.Fields(line); len(f) > 0 {
				lines[f[0]] = line
			}
		}
		for _, v := range append(console.Variables(), checks...) {
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
	{Name: "CONSOLE_HTTP_ADDR", Default: ":8084"}, {Name: "CONSOLE_SESSION_TTL", Default: "8h"}, {Name: "AUTH_AUDIENCE", Default: "paysuite"},
	{Name: "LOG_LEVEL", Default: "info"}, {Name: "LOG_FORMAT"},
}
