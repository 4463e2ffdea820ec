package observability

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/paysuite/payments/test/support/mdtest"
	"github.com/paysuite/payments/test/support/repo"
)

// runbookPrefix is what every runbook_url starts with: the operations guide
// on the repository's default branch.
const runbookPrefix = "https://github.com/paysuite/payments/blob/main/docs/operations.md#"

// TestAlertRules parses deploy/prometheus/alerts.yml with Prometheus's own
// rule parser and checks each alert: the thresholds the operations guide
// promises, a runbook that exists, and only metrics and labels the services
// expose.
func TestAlertRules(t *testing.T) {
	path := repo.Path(t, "deploy/prometheus/alerts.yml")
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("rulefmt.ParseFile(%s): %v", path, errs)
	}
	anchors := markdownAnchors(t, repo.Path(t, "docs/operations.md"))
	known := knownFamilies()

	type want struct {
		metric    string
		funcs     []string // functions the expression must use
		op        string
		threshold float64
		forDur    time.Duration
		severity  string
	}
	wants := map[string]want{
		"OutboxOldestPendingTooOld":         {"outbox_oldest_pending_age_seconds", nil, ">", 60, 0, "critical"},
		"OutboxDeadEvents":                  {"outbox_dead_events", nil, ">", 0, 0, "critical"},
		"OutboxSendBlocked":                 {"outbox_send_failures_total", []string{"increase"}, ">", 0, 0, "critical"},
		"OutboxBrokerUnreachable":           {"outbox_send_failures_total", []string{"increase"}, ">", 0, 2 * time.Minute, "warning"},
		"OutboxLogicalSlotLag":              {"outbox_logical_lag_seconds", nil, ">", 60, 0, "critical"},
		"OutboxLogicalSlotLeftBehind":       {"outbox_logical_slot_left_behind", nil, ">", 0, 0, "warning"},
		"OutboxLogicalSynchronousCandidate": {"outbox_logical_synchronous_candidate", nil, ">", 0, 0, "critical"},
		"ConsumerDLTRecords":                {"consumer_dlt_records_total", []string{"increase"}, ">", 0, 0, "warning"},
		"ConsumerCommitsRefused":            {"consumer_commit_failures_total", []string{"increase"}, ">", 0, 0, "warning"},
		"ConsumerLagGrowing":                {"consumer_lag", []string{"deriv"}, ">", 0, 5 * time.Minute, "warning"},
		"ConsumerWaitingForDependency":      {"consumer_dependency_waits_total", []string{"increase"}, ">", 0, 0, "warning"},
		"TransfersErrorRatioHigh":           {"http_requests_total", []string{"rate"}, ">", 0.01, 5 * time.Minute, "critical"},
		"TransfersResultsHeld":              {"transfers_results_held_overdue", nil, ">", 0, 0, "critical"},
		"TransfersShedding":                 {"transfers_admission_shed_total", []string{"rate"}, ">", 0, 10 * time.Minute, "warning"},
		"ServiceDown":                       {"up", nil, "==", 0, time.Minute, "critical"},
	}

	var got []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: rule %q is not an alert; this file holds alerts only", g.Name, r.Record)
				continue
			}
			got = append(got, r.Alert)
			t.Run(r.Alert, func(t *testing.T) {
				w, ok := wants[r.Alert]
				if !ok {
					t.Fatalf("alert %s is not expected by this test: add it to wants with its threshold", r.Alert)
				}
				names, problems := checkExpr(known, r.Expr)
				for _, p := range problems {
					t.Errorf("expr: %s", p)
				}
				if !slices.Contains(names, w.metric) {
					t.Errorf("expr uses %v, want %s", names, w.metric)
				}
				root, err := promQL.ParseExpr(r.Expr)
				if err != nil {
					t.Fatalf("parse expr: %v", err)
				}
				op, threshold, ok := comparison(root)
				if !ok || op != w.op || threshold != w.threshold {
					t.Errorf("expr compares %q %v (found: %v), want %s %v", op, threshold, ok, w.op, w.threshold)
				}
				for _, fn := range w.funcs {
					if !usesFunc(root, fn) {
						t.Errorf("expr does not use %s()", fn)
					}
				}
				if got := time.Duration(r.For); got != w.forDur {
					t.Errorf("for = %v, want %v", got, w.forDur)
				}
				if got := r.Labels["severity"]; got != w.severity {
					t.Errorf("severity = %q, want %q", got, w.severity)
				}
				for _, a := range []string{"summary", "description"} {
					if strings.TrimSpace(r.Annotations[a]) == "" {
						t.Errorf("annotation %s is empty", a)
					}
				}
				url := r.Annotations["runbook_url"]
				anchor, ok := strings.CutPrefix(url, runbookPrefix)
				if !ok {
					t.Errorf("runbook_url %q does not start with %s", url, runbookPrefix)
				} else if !anchors[anchor] {
					t.Errorf("runbook_url anchor #%s is not a heading of docs/operations.md", anchor)
				}
				if want := strings.ToLower(r.Alert); anchor != want {
					t.Errorf("runbook anchor = %q, want the alert's own section #%s", anchor, want)
				}
			})
		}
	}
	slices.Sort(got)
	var all []string
	for name := range wants {
		all = append(all, name)
	}
	slices.Sort(all)
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("alerts mismatch (-want +got):\n%s", diff)
	}
}

// TestTransfersErrorRatioSelectsPostServerErrors pins the selectors of the
// error-ratio alert: 5xx of POST /transferencias but those shed at the door
// (503 overloaded) over all POST /transferencias. (TestServiceObservability proves that these label values
// are the ones the transfers service reports.)
func TestTransfersErrorRatioSelectsPostServerErrors(t *testing.T) {
	path := repo.Path(t, "deploy/prometheus/alerts.yml")
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("parse: %v", errs)
	}
	var expr string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "TransfersErrorRatioHigh" {
				expr = r.Expr
			}
		}
	}
	root, err := promQL.ParseExpr(expr)
	if err != nil {
		t.Fatalf("parse %q: %v", expr, err)
	}
	var got []string
	parser.Inspect(root, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			var ms []string
			for _, m := range vs.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					ms = append(ms, m.String())
				}
			}
			slices.Sort(ms)
			got = append(got, strings.Join(ms, ","))
		}
		return nil
	})
	want := []string{
		`method="POST",route="/transferencias",status=~"5.."`,
		``, // transfers_admission_shed_total: load shed at the door is not an error
		`method="POST",route="/transferencias"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selectors mismatch (-want +got):\n%s", diff)
	}
}

// comparison returns the top-level comparison of an alert expression and
// its scalar right-hand side.
func comparison(e parser.Expr) (op string, threshold float64, ok bool) {
	for {
		p, isParen := e.(*parser.ParenExpr)
		if !isParen {
			break
		}
		e = p.Expr
	}
	b, isBinary := e.(*parser.BinaryExpr)
	if !isBinary || !b.Op.IsComparisonOperator() {
		return "", 0, false
	}
	n, isNumber := b.RHS.(*parser.NumberLiteral)
	if !isNumber {
		return b.Op.String(), 0, false
	}
	return b.Op.String(), n.Val, true
}

func usesFunc(root parser.Node, name string) bool {
	found := false
	parser.Inspect(root, func(n parser.Node, _ []parser.Node) error {
		if c, ok := n.(*parser.Call); ok && c.Func.Name == name {
			found = true
		}
		return nil
	})
	return found
}

// markdownAnchors returns the anchors GitHub gives the headings of a
// Markdown file.
func markdownAnchors(tb testing.TB, path string) map[string]bool {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	return mdtest.Anchors(string(b))
}

// TestPrometheusConfig checks deploy/prometheus/prometheus.yml: one job per
// service named after it (the alerts group by job), scraping /metrics on the
// service's port, and the rule file loaded.
func TestPrometheusConfig(t *testing.T) {
	path := repo.Path(t, "deploy/prometheus/prometheus.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global struct {
			ScrapeInterval     string `yaml:"scrape_interval"`
			ScrapeTimeout      string `yaml:"scrape_timeout"`
			EvaluationInterval string `yaml:"evaluation_interval"`
		} `yaml:"global"`
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	for _, d := range []string{cfg.Global.ScrapeInterval, cfg.Global.ScrapeTimeout, cfg.Global.EvaluationInterval} {
		if _, err := model.ParseDuration(d); err != nil {
			t.Errorf("global interval %q: %v", d, err)
		}
	}
	if diff := cmp.Diff([]string{"alerts.yml"}, cfg.RuleFiles); diff != "" {
		t.Errorf("rule_files mismatch (-want +got):\n%s", diff)
	}
	for _, rf := range cfg.RuleFiles {
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), rf)); err != nil {
			t.Errorf("rule file %s: %v", rf, err)
		}
	}
	ports := map[string]int{"transfers": 8080, "ledger": 8081, "antifraud": 8082, "notifications": 8083}
	got := map[string][]string{}
	for _, sc := range cfg.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s, want /metrics", sc.JobName, sc.MetricsPath)
		}
		for _, s := range sc.StaticConfigs {
			got[sc.JobName] = append(got[sc.JobName], s.Targets...)
		}
	}
	want := map[string][]string{}
	for name, port := range ports {
		want[name] = []string{name + ":" + strconv.Itoa(port)}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scrape jobs mismatch (-want +got):\n%s", diff)
	}
}
