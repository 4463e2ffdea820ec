// Package repo locates the repository's own files from a test or a test
// helper: go test runs in the package's folder, so the root is the nearest
// folder above the working directory that holds go.mod. It is the one copy
// of that walk.
package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Root returns the repository's root: the nearest folder holding go.mod at
// or above the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory; run from inside the repository")
		}
		dir = parent
	}
}

// Path returns the root joined with elem (each slash-separated, as
// "deploy/prometheus/alerts.yml"), failing tb when there is no root.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	parts := []string{root}
	for _, e := range elem {
		parts = append(parts, filepath.FromSlash(e))
	}
	return filepath.Join(parts...)
}
