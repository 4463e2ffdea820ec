package envconfig_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/envconfig"
)

type level int

type nested struct {
	Timeout time.Duration `env:"T_TIMEOUT" envDefault:"1m" help:"a duration"`
}

type config struct {
	Name     string        `env:"T_NAME" help:"a name with a Go default"`
	Count    int           `env:"T_COUNT" envDefault:"3" help:"an integer"`
	Big      int64         `env:"T_BIG" envDefault:"10" help:"a 64-bit integer"`
	Rate     float64       `env:"T_RATE" envDefault:"1.5" help:"a number"`
	On       bool          `env:"T_ON" envDefault:"true" help:"a boolean"`
	List     []string      `env:"T_LIST" help:"a list"`
	URL      string        `env:"T_URL,required" secret:"url" help:"a URL with a password"`
	Password string        `env:"T_PASSWORD" secret:"true" trim:"false" help:"a password"`
	Level    level         `env:"T_LEVEL" envDefault:"low" help:"a type of its own"`
	Wait     time.Duration `env:"T_WAIT" help:"a duration with a Go default"`
	Nested   nested
	Ignored  string `env:"-"`
	Internal string
}

func parseLevel(s string) (level, error) {
	switch s {
	case "low":
		return 1, nil
	case "high":
		return 2, nil
	}
	return 0, errors.New("is neither low nor high")
}

func defaults() config { return config{Name: "svc", Wait: 90 * time.Minute} }

func getenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParse(t *testing.T) {
	t.Parallel()
	cfg := defaults()
	err := envconfig.Parse(getenv(map[string]string{
		"T_URL": "postgres://u:pw@h/db", "T_LIST": " a, ,b ", "T_COUNT": " 7 ", "T_PASSWORD": " p w ", "T_LEVEL": "high", "T_ON": "false",
	}), &cfg, envconfig.WithParser(parseLevel))
	if err != nil {
		t.Fatal(err)
	}
	want := config{Name: "svc", Count: 7, Big: 10, Rate: 1.5, On: false, List: []string{"a", "b"}, URL: "postgres://u:pw@h/db",
		Password: " p w ", Level: 2, Wait: 90 * time.Minute, Nested: nested{Timeout: time.Minute}}
	if diff := cmp.Diff(want, cfg, cmp.AllowUnexported(config{})); diff != "" {
		t.Errorf("config mismatch (-want +got):\n%s", diff)
	}
}

// Every bad value is reported at once, each naming its variable; a bad
// value leaves the field at its default.
func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := defaults()
	err := envconfig.Parse(getenv(map[string]string{
		"T_COUNT": "many", "T_BIG": "1e3", "T_RATE": "fast", "T_ON": "yes please", "T_WAIT": "soon", "T_LEVEL": "mid", "T_TIMEOUT": "x",
	}), &cfg, envconfig.WithParser(parseLevel))
	want := []string{
		`T_COUNT: "many" is not an integer`,
		`T_BIG: "1e3" is not an integer`,
		`T_RATE: "fast" is not a number`,
		`T_ON: "yes please" is not a boolean`,
		`T_URL is required`,
		`T_LEVEL: is neither low nor high`,
		`T_WAIT: "soon" is not a duration`,
		`T_TIMEOUT: "x" is not a duration`,
	}
	if err == nil {
		t.Fatal("Parse accepted bad values")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
	if cfg.Count != 3 || cfg.Wait != 90*time.Minute || cfg.Level != 1 || !cfg.On {
		t.Errorf("a bad value did not leave its default: %+v", cfg)
	}
	joined := envconfig.Join(err, nil, errors.New("a cross-field rule"))
	if joined == nil || !strings.HasPrefix(joined.Error(), "invalid configuration: ") || !strings.HasSuffix(joined.Error(), "a cross-field rule") {
		t.Errorf("Join = %v", joined)
	}
	if envconfig.Join(nil, nil) != nil {
		t.Error("Join of no problem is not nil")
	}
}

func TestParseFileTag(t *testing.T) {
	t.Parallel()
	type withFile struct {
		Secret string `env:"T_SECRET_FILE,file" secret:"true" help:"a secret in a file"`
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := os.WriteFile(path, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	var c withFile
	if err := envconfig.Parse(getenv(map[string]string{"T_SECRET_FILE": path}), &c); err != nil || c.Secret != "s3cret" {
		t.Fatalf("Parse = %v, %q", err, c.Secret)
	}
	err := envconfig.Parse(getenv(map[string]string{"T_SECRET_FILE": filepath.Join(dir, "missing")}), &c)
	if err == nil || err.Error() != "T_SECRET_FILE: cannot read the file: no such file or directory" {
		t.Errorf("Parse = %v, want the variable and the cause, not the path", err)
	}
}

func TestVarsAndUsage(t *testing.T) {
	t.Parallel()
	vars := envconfig.Vars(defaults())
	var names []string
	for _, v := range vars {
		names = append(names, v.Name+"="+v.Default)
	}
	want := []string{"T_NAME=svc", "T_COUNT=3", "T_BIG=10", "T_RATE=1.5", "T_ON=true", "T_LIST=", "T_URL=", "T_PASSWORD=",
		"T_LEVEL=low", "T_WAIT=1h30m", "T_TIMEOUT=1m"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("variables mismatch (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := envconfig.Usage(&buf, vars); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"VARIABLE    DEFAULT     DESCRIPTION",
		"T_URL       (required)  a URL with a password",
		"T_TIMEOUT   1m          a duration",
		"T_LIST      -           a list",
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("usage has no line %q:\n%s", line, buf.String())
		}
	}
}

func TestParseRefusesAnUndocumentedVariable(t *testing.T) {
	t.Parallel()
	type bad struct {
		X string `env:"T_X"`
	}
	var c bad
	if err := envconfig.Parse(getenv(nil), &c); err == nil || !strings.Contains(err.Error(), "T_X has no help tag") {
		t.Errorf("Parse = %v, want a refusal of T_X", err)
	}
}

// A default is declared once: a field with both an envDefault tag and a
// value before parsing is refused, whichever value it holds.
func TestParseRefusesTwoDefaults(t *testing.T) {
	t.Parallel()
	c := config{URL: "postgres://h/db", Count: 3}
	err := envconfig.Parse(getenv(nil), &c)
	if err == nil || !strings.Contains(err.Error(), "T_COUNT has two defaults, its envDefault tag and the value 3") {
		t.Errorf("Parse = %v, want a refusal of T_COUNT's second default", err)
	}
	if err := envconfig.Parse(getenv(map[string]string{"T_URL": "postgres://h/db"}), new(config), envconfig.WithParser(parseLevel)); err != nil {
		t.Errorf("Parse of a declaration with one default each = %v", err)
	}
}

// The configuration logged at start shows every variable and no secret.
func TestLogValueMasksSecrets(t *testing.T) {
	t.Parallel()
	const password, urlPassword, queryPassword = "hunter2-password", "url-pass-word", "query-pass-word"
	for _, dsn := range []string{
		"postgres://user:" + urlPassword + "@db:5432/x?sslmode=verify-full",
		"postgres://user@db/x?password=" + queryPassword,
		"host=db user=u password=" + urlPassword,
		// A primary/standby pair's multi-host URL, and one whose first host is
		// IPv6 (net/url cannot parse it: hidden whole).
		"postgres://user:" + urlPassword + "@pg-a:5432,pg-b:5432/x?target_session_attrs=read-write",
		"postgres://user:" + urlPassword + "@[::1]:5432,pg-b:5432/x",
	} {
		cfg := defaults()
		if err := envconfig.Parse(getenv(map[string]string{"T_URL": dsn, "T_PASSWORD": password}), &cfg, envconfig.WithParser(parseLevel)); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("configuration", "config", envconfig.LogValue(cfg))
		out := buf.String()
		for _, secret := range []string{password, urlPassword, queryPassword} {
			if strings.Contains(out, secret) {
				t.Errorf("the log shows a secret (%q): %s", secret, out)
			}
		}
		for _, want := range []string{`"T_PASSWORD":"***"`, `"T_COUNT":"3"`, `"T_WAIT":"1h30m"`, `"T_NAME":"svc"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the log has no %s: %s", want, out)
			}
		}
		if strings.HasPrefix(dsn, "postgres://user:") && strings.Contains(dsn, "@db:") && !strings.Contains(out, `"T_URL":"postgres://user:xxxxx@db:5432/x?sslmode=verify-full"`) {
			t.Errorf("the URL lost more than its password: %s", out)
		}
		if strings.Contains(dsn, "@pg-a:") && !strings.Contains(out, `"T_URL":"postgres://user:xxxxx@pg-a:5432,pg-b:5432/x?target_session_attrs=read-write"`) {
			t.Errorf("the multi-host URL lost more than its password: %s", out)
		}
	}
}

// RedactURL keeps an endpoint's scheme, host and path, and drops what
// carries credentials: user info, query and fragment.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://hooks.example/paysuite":                              "https://hooks.example/paysuite",
		"https://user:pass@hooks.example:8443/p/a%2Fb?token=s3cr3t#x": "https://hooks.example:8443/p/a%2Fb",
		"http://hooks.example?sig=abc":                                "http://hooks.example",
		"hooks.example/paysuite?token=s3cr3t":                         "***",
		"https://":                                                    "***",
		"::not a url":                                                 "***",
	} {
		if got := envconfig.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// RedactDSN hides the password of the user info and of every query
// parameter named like a password, secret or token, and keeps the rest.
func TestRedactDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:secret@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?sslmode=disable"},
		{"postgres://h/db?password=p1&sslmode=require", "postgres://h/db?password=xxxxx&sslmode=require"},
		{"postgres://u:p0@h/db?sslpassword=p2", "postgres://u:xxxxx@h/db?sslpassword=xxxxx"},
		{"postgres://h/db?PGPassword=p3", "postgres://h/db?PGPassword=xxxxx"},
		{"kafka://h:9092?client_secret=p4&sasl_token=p5&acks=all", "kafka://h:9092?acks=all&client_secret=xxxxx&sasl_token=xxxxx"},
		{"postgres://u:p0@a:5432,b:5432/db?target_session_attrs=read-write", "postgres://u:xxxxx@a:5432,b:5432/db?target_session_attrs=read-write"},
		{"host=h password=p6 dbname=db", "***"},
		{"::not a url", "***"},
	} {
		got := envconfig.RedactDSN(tc.in)
		if got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, p := range []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "secret@"} {
			if strings.Contains(got, p) {
				t.Errorf("RedactDSN(%q) = %q shows %q", tc.in, got, p)
			}
		}
	}
}
