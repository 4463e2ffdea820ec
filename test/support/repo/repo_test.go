package repo_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paysuite/payments/test/support/repo"
)

// The root holds go.mod and this package's folder, and Path joins below it.
func TestRootHoldsGoMod(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod in %s: %v", root, err)
	}
	if got, want := repo.Path(t, "test/support/repo", "repo.go"), filepath.Join(root, "test", "support", "repo", "repo.go"); got != want {
		t.Fatalf("Path = %s, want %s", got, want)
	}
}

// Outside any repository there is no root.
func TestRootOutsideARepository(t *testing.T) {
	t.Chdir(t.TempDir())
	if root, err := repo.Root(); err == nil {
		t.Fatalf("Root() = %s, want an error", root)
	}
}
