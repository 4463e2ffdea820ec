package deploytest

import (
	"bytes"
	"context"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/paysuite/payments/test/support/repo"
	"golang.org/x/mod/modfile"
)

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN, ...
	Args string
}

// stage is one FROM and the instructions under it.
type stage struct {
	From         string // the image, ARGs not expanded
	Name         string
	Instructions []instruction
}

type dockerfile struct {
	// globalArgs are the ARGs before the first FROM, with their defaults.
	globalArgs map[string]string
	stages     []stage
}

func parseDockerfile(tb testing.TB) dockerfile {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(repo.Path(tb), "Dockerfile"))
	if err != nil {
		tb.Fatal(err)
	}
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		tb.Fatalf("Dockerfile ends in a continuation: %q", cur.String())
	}
	df := dockerfile{globalArgs: map[string]string{}}
	for _, l := range logical {
		cmd, args, _ := strings.Cut(l, " ")
		in := instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		switch {
		case in.Cmd == "FROM":
			fields := strings.Fields(in.Args)
			var st stage
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					st.Name = fields[i+1]
					i++
				default:
					st.From = fields[i]
				}
			}
			df.stages = append(df.stages, st)
		case len(df.stages) == 0:
			if in.Cmd != "ARG" {
				tb.Fatalf("Dockerfile: %s before the first FROM", in.Cmd)
			}
			k, v, _ := strings.Cut(in.Args, "=")
			df.globalArgs[k] = v
		default:
			st := &df.stages[len(df.stages)-1]
			st.Instructions = append(st.Instructions, in)
		}
	}
	if len(df.stages) < 2 {
		tb.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(df.stages))
	}
	return df
}

// keyValues parses `K=V K2="V 2"` as ENV and ARG write them.
func keyValues(s string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+)=("[^"]*"|\S*)`).FindAllStringSubmatch(s, -1) {
		out[m[1]] = strings.Trim(m[2], `"`)
	}
	return out
}

func (st stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range st.Instructions {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// buildRun returns the build stage's RUN that runs go build: its mount
// flags and its shell script.
func (st stage) buildRun(tb testing.TB) (mounts []string, script string) {
	tb.Helper()
	for _, in := range st.all("RUN") {
		if !strings.Contains(in.Args, "go build") {
			continue
		}
		rest := in.Args
		for strings.HasPrefix(rest, "--") {
			var flag string
			flag, rest, _ = strings.Cut(rest, " ")
			mounts = append(mounts, flag)
			rest = strings.TrimSpace(rest)
		}
		return mounts, rest
	}
	tb.Fatal("the build stage has no RUN with go build")
	return nil, ""
}

func TestDockerfileStages(t *testing.T) {
	df := parseDockerfile(t)
	build, final := df.stages[0], df.stages[len(df.stages)-1]

	// The builder's Go is the one go.mod asks for.
	modBytes, err := os.ReadFile(filepath.Join(repo.Path(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.ParseLax("go.mod", modBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	goMinor := strings.Join(strings.SplitN(mod.Go.Version, ".", 3)[:2], ".")
	from := strings.ReplaceAll(build.From, "${GO_VERSION}", df.globalArgs["GO_VERSION"])
	if from != "golang:"+goMinor {
		t.Errorf("build stage FROM %s (= %s), want golang:%s as go.mod says", build.From, from, goMinor)
	}

	mounts, script := build.buildRun(t)
	for _, want := range []string{"--mount=type=cache,target=/go/pkg/mod", "--mount=type=cache,target=/root/.cache/go-build"} {
		if !contains(mounts, want) {
			t.Errorf("go build RUN lacks %s; has %v", want, mounts)
		}
	}
	for _, want := range []string{"-trimpath", `-ldflags "-s -w"`, "-o /out/"} {
		if !strings.Contains(script, want) {
			t.Errorf("go build RUN lacks %s", want)
		}
	}
	envs := map[string]string{}
	for _, in := range build.all("ENV") {
		for k, v := range keyValues(in.Args) {
			envs[k] = v
		}
	}
	if envs["CGO_ENABLED"] != "0" {
		t.Errorf("build stage CGO_ENABLED = %q, want 0", envs["CGO_ENABLED"])
	}

	if !strings.HasPrefix(final.From, "gcr.io/distroless/static") && final.From != "scratch" {
		t.Errorf("runtime stage FROM %s, want distroless static or scratch", final.From)
	}
	var users []string
	for _, in := range final.all("USER") {
		users = append(users, in.Args)
	}
	if diff := cmp.Diff([]string{"65532:65532"}, users); diff != "" {
		t.Errorf("runtime USER mismatch (-want +got):\n%s", diff)
	}
	var copies []string
	for _, in := range final.all("COPY") {
		copies = append(copies, in.Args)
	}
	// The binaries, and the nonroot user's empty auth/ and jwks/, which
	// docker-compose.yml's volumes take their owner from.
	wantCopies := []string{"--from=" + build.Name + " /out/ /usr/local/bin/", "--from=" + build.Name + " --chown=65532:65532 /nonroot-home/ /home/nonroot/"}
	if diff := cmp.Diff(wantCopies, copies); diff != "" {
		t.Errorf("runtime COPY mismatch (-want +got):\n%s", diff)
	}
	// `command` in compose and Kubernetes picks the binary; an ENTRYPOINT
	// would turn it into arguments of another program.
	if e := final.all("ENTRYPOINT"); len(e) > 0 {
		t.Errorf("runtime stage has ENTRYPOINT %v", e)
	}
}

// dockerContext copies the repository into a temporary directory as Docker
// would send it: without what .dockerignore excludes.
func dockerContext(tb testing.TB) (string, *patternmatcher.PatternMatcher) {
	tb.Helper()
	root := repo.Path(tb)
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		tb.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		tb.Fatal(err)
	}
	dst := tb.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if d.IsDir() {
			if excluded && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if excluded || !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, filepath.Join(dst, rel))
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dst, pm
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func TestDockerignore(t *testing.T) {
	_, pm := dockerContext(t)
	for _, tc := range []struct {
		path     string
		excluded bool
	}{
		{"go.mod", false},
		{"go.sum", false},
		{"pkg/outbox/outbox.go", false},
		{"migrations/migrations.go", false},
		{"migrations/platform/00001_outbox_inbox.sql", false},
		{"services/transfers/cmd/transfers/main.go", false},
		{"services/suite/cmd/payments/main.go", false},
		{".git/HEAD", true},
		{".cache/kafka/4.3.1/libs/kafka.jar", true},
		{"deploy/k8s/base/kustomization.yaml", true},
		{"docker-compose.yml", true},
		{".env", true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := pm.MatchesOrParentMatches(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.excluded {
				t.Errorf("excluded = %v, want %v", got, tc.excluded)
			}
		})
	}
}

// TestDockerfileBuild runs the Dockerfile's build step as written — its ENV,
// its ARG defaults, its shell script — with the local Go toolchain, on the
// context that .dockerignore leaves, and checks the result: the six
// binaries, statically linked, stripped, with no build path inside.
func TestDockerfileBuild(t *testing.T) {
	df := parseDockerfile(t)
	build := df.stages[0]
	_, script := build.buildRun(t)

	ctxDir, _ := dockerContext(t)
	out := t.TempDir()
	if !strings.Contains(script, "/out/") {
		t.Fatal("the build script does not write to /out/")
	}
	script = strings.ReplaceAll(script, "/out", out)

	env := os.Environ()
	for _, in := range build.all("ENV") {
		for k, v := range keyValues(in.Args) {
			env = append(env, k+"="+v)
		}
	}
	args := map[string]string{"TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH}
	for _, in := range build.all("ARG") {
		k, v, ok := strings.Cut(in.Args, "=")
		if ok {
			args[k] = strings.Trim(v, `"`)
		}
	}
	for k, v := range args {
		env = append(env, k+"="+v)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = ctxDir
	cmd.Env = env
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Dockerfile's build step fails: %v\n%s", err, output.String())
	}

	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff([]string{"antifraud", "console", "ledger", "notifications", "payments", "transfers"}, got); diff != "" {
		t.Fatalf("binaries mismatch (-want +got):\n%s", diff)
	}
	for _, name := range got {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(out, name)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Error("dynamically linked (has an ELF interpreter): distroless static has no libc")
				}
			}
			if f.Section(".symtab") != nil {
				t.Error("symbol table present: not built with -ldflags -s")
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(ctxDir)) {
				t.Error("the build directory is embedded: not built with -trimpath")
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The Dockerfile names no frontend image (`# syntax=`): Docker's built-in
// frontend handles its RUN --mount, and a named one is pulled on every
// build, which fails where no registry is reachable (make compose-demo).
func TestDockerfileNoSyntaxDirective(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo.Path(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		directive := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(line), "#"), " ", ""))
		if strings.HasPrefix(directive, "syntax=") {
			t.Errorf("Dockerfile line %d is a syntax directive: %s", i+1, line)
		}
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			break // parser directives come before anything else
		}
	}
}
