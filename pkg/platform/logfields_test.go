package platform_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/platform"
)

// TestHTTPLogLinesCarryEachKeyOnce: the access line, a handler's line and
// the panic line of a request, logged as JSON through a service's logger
// (service added once, request_id from the context), repeat no key.
func TestHTTPLogLinesCarryEachKeyOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := platform.NewLogger(&buf, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	log = log.With("service", "transfers") // as a service's run does
	r := httpapi.NewRouter(log, nil, nil, func(context.Context) error { return nil })
	r.Get("/ok", func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "handled", "transfer_id", "t-1")
		w.WriteHeader(http.StatusNoContent)
	})
	r.Get("/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	for _, path := range []string{"/ok", "/panic"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil))
	}
	lines := 0
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		if dups := duplicateKeys(t, line); len(dups) > 0 {
			t.Errorf("keys %v more than once in %s", dups, line)
		}
		if !bytes.Contains(line, []byte(`"request_id"`)) {
			t.Errorf("no request_id in %s", line)
		}
	}
	if lines < 3 { // handled and its access line, the panic
		t.Fatalf("%d log lines, want at least 3:\n%s", lines, buf.String())
	}
}

// duplicateKeys returns the top-level keys of the JSON object line that
// appear more than once (encoding/json would silently keep the last).
func duplicateKeys(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", line)
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		if seen[k] {
			dups = append(dups, k)
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return dups
}

// logMethods are the logger methods whose arguments from the given index on
// are key-value pairs.
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"With":     0,
	"Resource": 0, // an audit record's resource: a key of its log line
}

// eventIDKey matches a log key that names an event id in any spelling.
var eventIDKey = regexp.MustCompile(`(?i)event(o)?_?id$`)

// eventIDKeyIsCanonical reports whether k, a key for an event id, is the
// suite's one spelling: evento_id, alone or after a role (decided_evento_id).
func eventIDKeyIsCanonical(k string) bool {
	return !eventIDKey.MatchString(k) || k == "evento_id" || strings.HasSuffix(k, "_evento_id")
}

// TestEventIDKeyRule: the rule that keeps one key for the event id refuses
// the other spellings that the suite once logged.
func TestEventIDKeyRule(t *testing.T) {
	t.Parallel()
	for k, want := range map[string]bool{
		"evento_id": true, "decided_evento_id": true, "first_evento_id": true, "transfer_id": true,
		"event_id": false, "eventId": false, "eventID": false, "eventoId": false, "decided_event_id": false,
	} {
		if got := eventIDKeyIsCanonical(k); got != want {
			t.Errorf("eventIDKeyIsCanonical(%q) = %v, want %v", k, got, want)
		}
	}
}

// TestLogKeysAreDocumented: every literal key passed to a logger or an audit
// record under pkg/ and services/ is a row of docs/logging.md, so a field
// keeps one name across services (transfer_id, never transferencia_id), and
// an event id is logged as evento_id everywhere.
func TestLogKeysAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/logging.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, row := range regexp.MustCompile(`(?m)^\| (.+?) \|`).FindAllStringSubmatch(string(doc), -1) {
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
			documented[m[1]] = true
		}
	}
	if !documented["transfer_id"] || documented["transferencia_id"] {
		t.Fatalf("docs/logging.md does not read as expected: %v", documented)
	}
	found := 0
	for _, root := range []string{"../../pkg", "../../services"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			fs := token.NewFileSet()
			f, err := parser.ParseFile(fs, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := c.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				first, ok := logMethods[sel.Sel.Name]
				if !ok {
					return true
				}
				if pkg, isIdent := sel.X.(*ast.Ident); isIdent && pkg.Name == "http" {
					return true // http.Error writes a response, not a log line
				}
				for i := first; i < len(c.Args); i += 2 {
					lit, ok := c.Args[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						break // an Attr or a spread slice: the pairs' alignment is unknown from here
					}
					k, _ := strconv.Unquote(lit.Value)
					found++
					if !documented[k] {
						t.Errorf("%s: log key %q is not in docs/logging.md", fs.Position(lit.Pos()), k)
					}
					if !eventIDKeyIsCanonical(k) {
						t.Errorf("%s: log key %q names an event id: the suite's key is evento_id", fs.Position(lit.Pos()), k)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 50 {
		t.Fatalf("found %d log keys; the scan is broken", found)
	}
}
