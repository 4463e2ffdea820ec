package dlt_test

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLibraryImportsNoConsumerLoop: pkg/dlt holds the Spring header format
// that the consumer loop writes, so the loop imports dlt and dlt never
// imports the loop; its command line lives with the operator CLI.
func TestLibraryImportsNoConsumerLoop(t *testing.T) {
	t.Parallel()
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasSuffix(path, "/pkg/consumer") || path == "flag" {
				t.Errorf("%s imports %s: pkg/dlt is a library below the consumer loop, without a command line", name, path)
			}
		}
	}
}
