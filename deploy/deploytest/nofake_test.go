package deploytest

import (
	"context"
	"github.com/paysuite/payments/test/support/repo"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestImageHoldsNoFakeKafka: every build target of the Dockerfile (the
// packages its go build compiles, for every binary of BINARIES), built with
// the Dockerfile's build tags, links no fake broker (franz-go's kfake): the
// production image runs against a real Kafka only, and holds no development
// runner (payments-dev, services/suite).
func TestImageHoldsNoFakeKafka(t *testing.T) {
	t.Parallel()
	df := parseDockerfile(t)
	_, script := df.stages[0].buildRun(t)

	var tags string
	if m := regexp.MustCompile(`go build (?:[^$]*?)-tags (\S+)`).FindStringSubmatch(script); m != nil {
		tags = m[1]
	}
	if tags == "" {
		t.Fatalf("the Dockerfile's go build sets no -tags (want nokfake):\n%s", script)
	}
	// The case arms map each binary to its package: "payments) pkgs=... ./services/suite/cmd/payments"
	// and "transfers|ledger|...) pkgs=... ./services/$bin/cmd/$bin".
	var targets []string
	for _, bin := range strings.Fields(buildArg(t, df, "BINARIES")) {
		pkg := ""
		for _, m := range regexp.MustCompile(`([a-z|]+)\) pkgs="\$pkgs (\S+)"`).FindAllStringSubmatch(script, -1) {
			for _, name := range strings.Split(m[1], "|") {
				if name == bin {
					pkg = strings.ReplaceAll(m[2], "$bin", bin)
				}
			}
		}
		if pkg == "" {
			t.Fatalf("binary %s has no package in the build script", bin)
		}
		targets = append(targets, pkg)
	}
	if len(targets) < 5 {
		t.Fatalf("build targets %v: want the four services and payments", targets)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"list", "-tags", tags, "-deps"}, targets...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo.Path(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "franz-go/pkg/kfake") {
			t.Errorf("the image's build targets %v link %s", targets, dep)
		}
		// The development runner (payments-dev, and the all-in-one
		// runner it drives) stays out of the image too.
		if dep == "github.com/paysuite/payments/services/suite" || strings.HasSuffix(dep, "/cmd/payments-dev") {
			t.Errorf("the image's build targets %v link the development runner %s", targets, dep)
		}
	}
}

// buildArg is the default of ARG name in the build stage.
func buildArg(t *testing.T, df dockerfile, name string) string {
	t.Helper()
	for _, in := range df.stages[0].all("ARG") {
		if k, v, ok := strings.Cut(in.Args, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("the build stage has no ARG %s with a default", name)
	return ""
}
