package deploytest

import (
	"context"
	"github.com/paysuite/payments/test/support/repo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// promtool runs Prometheus's own tool with args from the repository root,
// and fails the test when it is missing: the alerts must be tested, not
// skipped (test/infra/ensure-promtool.sh installs it; Debian package
// "prometheus").
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): install it with test/infra/ensure-promtool.sh (apt-get install prometheus)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = repo.Path(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Each alert of deploy/prometheus/alerts.yml has a promtool unit test that
// shows it firing on the first failure and quiet otherwise, one file per
// alert group, and every group has one.
func TestAlertRulesUnitTests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repo.Path(t), "deploy/prometheus/tests/*_test.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files under deploy/prometheus/tests: %v", err)
	}
	args := []string{"test", "rules"}
	for _, f := range files {
		rel, _ := filepath.Rel(repo.Path(t), f)
		args = append(args, rel)
	}
	out := promtool(t, args...)
	if n := strings.Count(out, "SUCCESS"); n != len(files) {
		t.Errorf("promtool reported %d successes for %d files:\n%s", n, len(files), out)
	}
	tested := map[string]bool{}
	for _, f := range files {
		for _, line := range strings.Split(readFile(t, f), "\n") {
			if name, ok := strings.CutPrefix(strings.TrimSpace(line), "alertname: "); ok {
				tested[name] = true
			}
		}
	}
	for _, line := range strings.Split(readFile(t, filepath.Join(repo.Path(t), "deploy/prometheus/alerts.yml")), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok && !tested[name] {
			t.Errorf("alert %s has no promtool unit test in deploy/prometheus/tests", name)
		}
	}
}

// The rule file and the scrape configuration pass promtool's checks (make
// lint runs the same).
func TestPrometheusFilesCheck(t *testing.T) {
	promtool(t, "check", "rules", "deploy/prometheus/alerts.yml")
	promtool(t, "check", "config", "deploy/prometheus/prometheus.yml")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // a repository file
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
