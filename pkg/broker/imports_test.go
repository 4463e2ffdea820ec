package broker_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// kafkaClients are the import paths of the Kafka client libraries.
var kafkaClients = []string{"github.com/segmentio/kafka-go", "github.com/twmb/franz-go"}

// clientAllowed are the production files outside pkg/broker that may import
// a Kafka client: the embedded demo's in-process broker (build-tagged).
var clientAllowed = map[string]bool{"services/suite/fake.go": true}

// clientImports walks the services/ and pkg/ folders under root and returns
// each production (non-test) Go file outside pkg/broker that imports a
// Kafka client, as "path: import".
func clientImports(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	for _, dir := range []string{"services", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == "pkg/broker" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || clientAllowed[rel] {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, c := range kafkaClients {
					if p == c || strings.HasPrefix(p, c+"/") {
						out = append(out, rel+": "+p)
					}
				}
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			tb.Fatal(err)
		}
	}
	return out
}

// No production file of services/ or pkg/ outside pkg/broker imports a
// Kafka client: handlers, the consumer loop, the outbox and the DLT tooling
// speak broker.Record, and only pkg/broker converts it.
func TestNoKafkaClientOutsideBroker(t *testing.T) {
	t.Parallel()
	if got := clientImports(t, filepath.Join("..", "..")); len(got) > 0 {
		t.Errorf("files that import a Kafka client outside pkg/broker:\n%s", strings.Join(got, "\n"))
	}
}

// The walk finds a file that imports a client, under services/ or pkg/,
// and leaves test files, pkg/broker and the allowed files alone.
func TestClientImportsFindsAnImport(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("services/x/internal/consume/h.go", "package consume\n\nimport \"github.com/segmentio/kafka-go\"\n\nvar _ kafka.Message\n")
	write("pkg/y/y.go", "package y\n\nimport _ \"github.com/twmb/franz-go/pkg/kgo\"\n")
	write("pkg/y/y_test.go", "package y\n\nimport _ \"github.com/twmb/franz-go/pkg/kgo\"\n")
	write("pkg/broker/b.go", "package broker\n\nimport _ \"github.com/twmb/franz-go/pkg/kgo\"\n")
	write("services/suite/fake.go", "package suite\n\nimport _ \"github.com/twmb/franz-go/pkg/kfake\"\n")
	write("pkg/z/z.go", "package z\n\nimport _ \"github.com/segmentio/kafka-gone\"\n")
	want := []string{"services/x/internal/consume/h.go: github.com/segmentio/kafka-go", "pkg/y/y.go: github.com/twmb/franz-go/pkg/kgo"}
	got := clientImports(t, root)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
