// Package helptest checks a service binary's command line, the tests every
// service binary runs on its run function: --help lists every variable,
// migrate builds the schema, and bad invocations fail with a clear error.
package helptest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/envconfig"
)

// Run is a binary's run function (platform.Main's caller).
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// ListsEveryVariable runs the binary named name with --help, -h and help,
// with an empty environment (help reads none), and fails t unless each of
// vars has a line that starts with its name and holds its help and, when
// set, its default.
func ListsEveryVariable(t *testing.T, run Run, name string, vars []envconfig.Var) {
	t.Helper()
	for _, arg := range []string{"--help", "-h", "help"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{name, arg}, func(string) string { return "" }, &out); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		lines := map[string]string{}
		for line := range strings.Lines(out.String()) {
			if f := strings.Fields(line); len(f) > 0 {
				lines[f[0]] = line
			}
		}
		for _, v := range vars {
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
