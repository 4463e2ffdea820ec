package observability

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/paysuite/payments/test/support/repo"
)

// dashboard is the part of a Grafana dashboard JSON model the test reads.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// grafanaVars are the variables Grafana substitutes in queries, with a
// value that makes the query valid PromQL for the parser.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$__interval", "1m",
	"$__range", "1h",
)

// TestDashboard checks deploy/grafana/payments.json: it parses, has a row
// for each area, every panel queries the Prometheus data source variable
// with expressions that parse and name only metrics and labels the services
// expose, and together the panels show every family the services expose.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(repo.Path(t, "deploy/grafana/payments.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("payments.json does not parse: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: both are required", d.Title, d.UID)
	}
	known := knownFamilies()
	used := map[string]bool{}
	ids := map[int]bool{}
	var rows []string
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				rows = append(rows, p.Title)
				walk(p.Panels)
				continue
			}
			if p.Title == "" {
				t.Errorf("panel %d has no title", p.ID)
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
			}
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				names, problems := checkExpr(known, grafanaVars.Replace(tg.Expr))
				for _, pr := range problems {
					t.Errorf("panel %q, query %s: %s\n\t%s", p.Title, tg.RefID, pr, tg.Expr)
				}
				for _, n := range names {
					if f, ok := familyOf(known, n); ok {
						used[f.Name] = true
					}
				}
			}
		}
	}
	walk(d.Panels)

	wantRows := []string{"HTTP", "Outbox", "Consumers", "Ledger", "Antifraud", "Notifications", "Logical relay", "Admission control"}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("rows mismatch (-want +got):\n%s", diff)
	}
	var missing []string
	for name := range known {
		if !used[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("families no panel shows: %v", missing)
	}

	// Template variables: a Prometheus data source, and services from a
	// metric every service exposes.
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*), *([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: definition %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		f, ok := familyOf(known, m[1])
		if !ok || (!slices.Contains(f.Labels, m[2]) && !slices.Contains(targetLabels, m[2])) {
			t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
	}
	if diff := cmp.Diff([]string{"datasource", "job"}, vars); diff != "" {
		t.Errorf("variables mismatch (-want +got):\n%s", diff)
	}
}
