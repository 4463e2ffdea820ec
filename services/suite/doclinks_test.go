package suite_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paysuite/payments/test/support/mdtest"
)

// Every relative link of the repository's Markdown files names a file that
// exists and, for a Markdown target with a #fragment, a heading of it, so
// moving a section from one page to another cannot leave a dangling link.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found %d Markdown files under %s, want the repository's", len(pages), root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		text, err := os.ReadFile(path) //nolint:gosec // a Markdown file of this repository
		if err != nil {
			t.Fatal(err)
		}
		a := mdtest.Anchors(string(text))
		anchors[path] = a
		return a
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	scheme := regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range link.FindAllStringSubmatch(mdtest.WithoutCodeBlocks(string(text)), -1) {
			target := m[1]
			if scheme.MatchString(target) {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
			}
			if _, err := os.Stat(file); err != nil { //nolint:gosec // a link target inside this repository
				t.Errorf("%s links %s: no such file", rel, target)
				continue
			}
			if fragment != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[fragment] {
				t.Errorf("%s links %s: no heading with that anchor", rel, target)
			}
		}
	}
}

// markdownFiles lists the .md files under root, skipping hidden folders
// (.git, .cache).
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".md") {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}
