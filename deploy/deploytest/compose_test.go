package deploytest

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/google/go-cmp/cmp"
)

// appImage is the image every suite program of the compose file runs.
const appImage = "paysuite/payments:local"

// devImage is the demo's image: the operator CLI and the development
// runner payments-dev, which the services' image does not hold.
const devImage = "paysuite/payments-dev:local"

// loadCompose loads and validates path as `docker compose` does (schema
// validation, interpolation, normalisation), with an empty environment so
// that the result does not depend on the shell running the test.
func loadCompose(tb testing.TB, path string) (*types.Project, error) {
	tb.Helper()
	opts, err := cli.NewProjectOptions([]string{path},
		cli.WithWorkingDirectory(filepath.Dir(path)),
		cli.WithEnv(nil),
	)
	if err != nil {
		tb.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

func composeProject(tb testing.TB) *types.Project {
	tb.Helper()
	p, err := loadCompose(tb, filepath.Join(repoRoot(tb), "docker-compose.yml"))
	if err != nil {
		tb.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func composeService(tb testing.TB, p *types.Project, name string) types.ServiceConfig {
	tb.Helper()
	s, ok := p.Services[name]
	if !ok {
		tb.Fatalf("docker-compose.yml has no service %q", name)
	}
	return s
}

func env(s types.ServiceConfig, name string) string {
	if v, ok := s.Environment[name]; ok && v != nil {
		return *v
	}
	return ""
}

// The loader really validates: a file with an unknown key or a bad
// depends_on condition is refused, so the tests below load a file that
// `docker compose` itself would accept.
func TestComposeLoaderRejectsInvalidFiles(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
	}{
		{"unknown service key", "services:\n  a:\n    image: x\n    helthcheck: {}\n"},
		{"unknown depends_on condition", "services:\n  a:\n    image: x\n    depends_on:\n      b: {condition: service_ready}\n  b:\n    image: x\n"},
		{"depends_on unknown service", "services:\n  a:\n    image: x\n    depends_on: [nope]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "docker-compose.yml")
			if err := os.WriteFile(path, []byte("name: x\n"+tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := loadCompose(t, path); err == nil {
				t.Fatal("invalid compose file loaded without error")
			}
		})
	}
}

func TestComposeServices(t *testing.T) {
	p := composeProject(t)
	want := []string{"antifraud", "auth-keygen", "console", "demo", "kafka", "kafka-init", "ledger", "notifications", "postgres", "transfers"}
	if diff := cmp.Diff(want, sortedKeys(p.Services)); diff != "" {
		t.Errorf("services mismatch (-want +got):\n%s", diff)
	}
}

func TestComposeImages(t *testing.T) {
	p := composeProject(t)
	root := repoRoot(t)
	for _, tc := range []struct {
		service, image string
		built          bool
	}{
		{"postgres", "postgres:18-alpine", false},
		{"kafka", "apache/kafka:4.3.1", false},
		{"kafka-init", appImage, true},
		{"auth-keygen", appImage, true},
		{"transfers", appImage, true},
		{"ledger", appImage, true},
		{"antifraud", appImage, true},
		{"notifications", appImage, true},
		{"demo", devImage, true},
		{"console", appImage, true},
	} {
		t.Run(tc.service, func(t *testing.T) {
			s := composeService(t, p, tc.service)
			if s.Image != tc.image {
				t.Errorf("image = %q, want %q", s.Image, tc.image)
			}
			if !tc.built {
				if s.Build != nil {
					t.Errorf("a stock image is built: %+v", s.Build)
				}
				return
			}
			if s.Build == nil {
				t.Fatal("no build section: the suite image must be built from the Dockerfile")
			}
			if s.Build.Context != root || s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("build = {context %q, dockerfile %q}, want {%q, Dockerfile}", s.Build.Context, s.Build.Dockerfile, root)
			}
			// Only the demo's image adds the development runner.
			wantBinaries, gotBinaries := "", ""
			if tc.service == "demo" {
				wantBinaries = "payments payments-dev"
			}
			if v := s.Build.Args["BINARIES"]; v != nil {
				gotBinaries = *v
			}
			if gotBinaries != wantBinaries {
				t.Errorf("build arg BINARIES = %q, want %q (empty: the Dockerfile's default)", gotBinaries, wantBinaries)
			}
			// The image's nonroot user; no capabilities; nothing written
			// to the image's filesystem.
			if s.User != "65532:65532" {
				t.Errorf("user = %q, want 65532:65532", s.User)
			}
			if !s.ReadOnly {
				t.Error("root filesystem is writable")
			}
			if diff := cmp.Diff([]string{"ALL"}, s.CapDrop); diff != "" {
				t.Errorf("cap_drop mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComposePorts(t *testing.T) {
	p := composeProject(t)
	published := map[string]string{} // host port -> service
	for name, s := range p.Services {
		for _, port := range s.Ports {
			if other, dup := published[port.Published]; dup {
				t.Errorf("host port %s published by %s and %s", port.Published, other, name)
			}
			published[port.Published] = name
		}
	}
	for _, svc := range services {
		t.Run(svc.Name, func(t *testing.T) {
			s := composeService(t, p, svc.Name)
			var got []string
			for _, port := range s.Ports {
				got = append(got, port.Published+":"+strconv.FormatUint(uint64(port.Target), 10)+"/"+port.Protocol)
			}
			want := []string{strconv.Itoa(svc.Port) + ":" + strconv.Itoa(svc.Port) + "/tcp"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ports mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComposeServiceConfiguration(t *testing.T) {
	p := composeProject(t)
	known := knownEnv(t)
	databases := map[string]string{}
	for _, svc := range services {
		t.Run(svc.Name, func(t *testing.T) {
			s := composeService(t, p, svc.Name)
			if diff := cmp.Diff(types.ShellCommand{svc.Binary}, s.Command); diff != "" {
				t.Errorf("command mismatch (-want +got):\n%s", diff)
			}
			for _, tc := range []struct{ name, want string }{
				{"KAFKA_BROKERS", "kafka:9092"},
				{"HTTP_ADDR", ":" + strconv.Itoa(svc.Port)},
				// Its own Kafka principal; its password a mounted secret
				// that no other service mounts.
				{"KAFKA_SASL_MECHANISM", "SCRAM-SHA-512"},
				{"KAFKA_SASL_USERNAME", svc.Name},
				{"KAFKA_SASL_PASSWORD_FILE", "/run/secrets/kafka-" + svc.Name + "-password"},
			} {
				if got := env(s, tc.name); got != tc.want {
					t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
				}
			}
			for name := range s.Environment {
				if !known[name] {
					t.Errorf("environment variable %s is read by no suite program", name)
				}
			}
			if _, ok := s.Environment["KAFKA_SASL_PASSWORD"]; ok {
				t.Error("KAFKA_SASL_PASSWORD is set: use KAFKA_SASL_PASSWORD_FILE and a secret")
			}
			var secrets []string
			for _, sec := range s.Secrets {
				secrets = append(secrets, sec.Source)
			}
			if diff := cmp.Diff([]string{"kafka-" + svc.Name + "-password"}, secrets); diff != "" {
				t.Errorf("secrets mismatch (-want +got):\n%s", diff)
			}

			// Its own database on the compose PostgreSQL, as its own role.
			raw := env(s, "DATABASE_URL")
			if raw == "" {
				t.Fatal("DATABASE_URL is not set")
			}
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("DATABASE_URL: %v", err)
			}
			db := strings.TrimPrefix(u.Path, "/")
			got := []string{u.Scheme, u.Hostname(), u.Port(), u.User.Username(), db}
			want := []string{"postgres", "postgres", "5432", svc.Name, svc.Name}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("DATABASE_URL {scheme host port user database} mismatch (-want +got):\n%s", diff)
			}
			if other, shared := databases[db]; shared {
				t.Errorf("database %s shared with %s", db, other)
			}
			databases[db] = svc.Name
		})
	}
	t.Run("notifications channel", func(t *testing.T) {
		s := composeService(t, p, "notifications")
		if got := env(s, "NOTIFY_CHANNEL"); got != "log" && got != "webhook" {
			t.Errorf("NOTIFY_CHANNEL = %q, want log or webhook", got)
		}
	})
}

func TestComposeHealthchecks(t *testing.T) {
	p := composeProject(t)
	type check struct {
		service string
		test    types.HealthCheckTest
	}
	checks := []check{
		{"postgres", types.HealthCheckTest{"CMD", "pg_isready", "-h", "127.0.0.1", "-U", "payments", "-d", "notifications"}},
		// The listener wants SASL: the probe uses the admin client settings
		// that the start script writes.
		{"kafka", types.HealthCheckTest{"CMD-SHELL", "/opt/kafka/bin/kafka-broker-api-versions.sh --bootstrap-server localhost:9092 --command-config /tmp/admin.properties >/dev/null 2>&1"}},
	}
	for _, svc := range services {
		checks = append(checks, check{svc.Name, types.HealthCheckTest{"CMD", suiteBinary, "probe", "http://localhost:" + strconv.Itoa(svc.Port) + "/readyz"}})
	}
	for _, tc := range checks {
		t.Run(tc.service, func(t *testing.T) {
			h := composeService(t, p, tc.service).HealthCheck
			if h == nil || h.Disable {
				t.Fatal("no healthcheck")
			}
			if diff := cmp.Diff(tc.test, h.Test); diff != "" {
				t.Errorf("healthcheck test mismatch (-want +got):\n%s", diff)
			}
			if h.Interval == nil || h.Timeout == nil || h.Retries == nil {
				t.Errorf("healthcheck without interval, timeout or retries: %+v", h)
			}
		})
	}
}

func TestComposeDependencies(t *testing.T) {
	p := composeProject(t)
	const (
		healthy   = types.ServiceConditionHealthy
		completed = types.ServiceConditionCompletedSuccessfully
	)
	serviceDeps := map[string]string{"postgres": healthy, "kafka-init": completed, "auth-keygen": completed}
	want := map[string]map[string]string{
		"postgres":      {},
		"kafka":         {},
		"kafka-init":    {"kafka": healthy},
		"auth-keygen":   {},
		"transfers":     serviceDeps,
		"ledger":        serviceDeps,
		"antifraud":     serviceDeps,
		"notifications": serviceDeps,
		"console":       {"transfers": healthy, "ledger": healthy, "antifraud": healthy, "notifications": healthy},
		"demo":          {"transfers": healthy, "ledger": healthy, "antifraud": healthy, "notifications": healthy, "console": healthy},
	}
	got := map[string]map[string]string{}
	for name, s := range p.Services {
		got[name] = map[string]string{}
		for dep, d := range s.DependsOn {
			got[name][dep] = d.Condition
			if !d.Required {
				t.Errorf("%s: dependency on %s is optional", name, dep)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("depends_on conditions mismatch (-want +got):\n%s", diff)
	}

	// `docker compose up demo` starts everything: every service is reached
	// from demo through depends_on.
	reached := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if reached[name] {
			return
		}
		reached[name] = true
		for dep := range p.Services[name].DependsOn {
			visit(dep)
		}
	}
	visit("demo")
	if diff := cmp.Diff(sortedKeys(p.Services), sortedKeys(reached)); diff != "" {
		t.Errorf("services started by `up demo` mismatch (-want +got):\n%s", diff)
	}
}

func TestComposeKafka(t *testing.T) {
	p := composeProject(t)
	s := composeService(t, p, "kafka")
	for _, tc := range []struct{ name, want string }{
		{"KAFKA_NODE_ID", "1"},
		{"KAFKA_PROCESS_ROLES", "broker,controller"},
		{"KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER"},
		{"KAFKA_CONTROLLER_QUORUM_VOTERS", "1@kafka:9093"},
		{"KAFKA_INTER_BROKER_LISTENER_NAME", "INTERNAL"},
		{"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1"},
		{"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1"},
		{"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1"},
		{"KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false"},
		// Secured: SCRAM on every client listener, ACLs enforced.
		{"KAFKA_SASL_ENABLED_MECHANISMS", "SCRAM-SHA-512"},
		{"KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL", "SCRAM-SHA-512"},
		{"KAFKA_AUTHORIZER_CLASS_NAME", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
		{"KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "false"},
		{"KAFKA_SUPER_USERS", "User:admin;User:ANONYMOUS"},
	} {
		if got := env(s, tc.name); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}

	// Every listener has a protocol, the containers' one is advertised as
	// kafka:9092, and the controller listener is one of them.
	listeners := map[string]string{} // name -> port
	for _, l := range strings.Split(env(s, "KAFKA_LISTENERS"), ",") {
		name, addr, ok := strings.Cut(l, "://")
		if !ok {
			t.Fatalf("KAFKA_LISTENERS entry %q is not NAME://host:port", l)
		}
		_, port, _ := strings.Cut(addr, ":")
		listeners[name] = port
	}
	protocols := map[string]bool{}
	for _, m := range strings.Split(env(s, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"), ",") {
		name, protocol, _ := strings.Cut(m, ":")
		protocols[name] = true
		// ANONYMOUS is a super user for the controller's sake: only the
		// CONTROLLER listener may be PLAINTEXT, and it is not published.
		if name != "CONTROLLER" && protocol != "SASL_PLAINTEXT" && protocol != "SASL_SSL" {
			t.Errorf("listener %s is %s: clients would connect as ANONYMOUS, a super user", name, protocol)
		}
	}
	for _, port := range s.Ports {
		if strconv.Itoa(int(port.Target)) == "9093" {
			t.Error("the PLAINTEXT controller listener is published on the host")
		}
	}
	// The start script writes the SCRAM users from the mounted secrets,
	// one per service and admin.
	var secrets []string
	for _, sec := range s.Secrets {
		secrets = append(secrets, sec.Source)
	}
	want := []string{"kafka-admin-password"}
	for _, svc := range services {
		want = append(want, "kafka-"+svc.Name+"-password")
	}
	slices.Sort(want)
	slices.Sort(secrets)
	if diff := cmp.Diff(want, secrets); diff != "" {
		t.Errorf("kafka secrets mismatch (-want +got):\n%s", diff)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "compose", "kafka", "start.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "for user in admin transfers ledger antifraud notifications; do") {
		t.Error("start.sh does not create the SCRAM user of every service")
	}
	for name, sec := range p.Secrets {
		if _, err := os.Stat(sec.File); err != nil {
			t.Errorf("secret %s: %v", name, err)
		}
	}
	if diff := cmp.Diff(sortedKeys(listeners), sortedKeys(protocols)); diff != "" {
		t.Errorf("listeners vs protocol map mismatch (-listeners +map):\n%s", diff)
	}
	if _, ok := listeners["CONTROLLER"]; !ok {
		t.Error("no CONTROLLER listener")
	}
	advertised := map[string]string{}
	for _, l := range strings.Split(env(s, "KAFKA_ADVERTISED_LISTENERS"), ",") {
		name, addr, _ := strings.Cut(l, "://")
		advertised[addr] = name
		if _, port, _ := strings.Cut(addr, ":"); listeners[name] != port {
			t.Errorf("advertised %s on port %s, but it listens on %q", name, port, listeners[name])
		}
	}
	if name := advertised["kafka:9092"]; name != env(s, "KAFKA_INTER_BROKER_LISTENER_NAME") {
		t.Errorf("kafka:9092 is advertised by listener %q, want the inter-broker listener", name)
	}
	// The quorum voter's port is the controller listener's.
	if _, port, _ := strings.Cut(env(s, "KAFKA_CONTROLLER_QUORUM_VOTERS"), ":"); listeners["CONTROLLER"] != port {
		t.Errorf("quorum voter port %s, controller listens on %s", port, listeners["CONTROLLER"])
	}
}

func TestComposeOneShots(t *testing.T) {
	p := composeProject(t)
	for _, tc := range []struct {
		service string
		command types.ShellCommand
		env     map[string]string
	}{
		{
			service: "kafka-init",
			command: types.ShellCommand{suiteBinary, "topics", "create", "--replication-factor", "1", "--acls"},
			env: map[string]string{
				"KAFKA_BROKERS": "kafka:9092", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "admin",
				"KAFKA_SASL_PASSWORD_FILE": "/run/secrets/kafka-admin-password",
			},
		},
		{
			service: "demo",
			command: types.ShellCommand{"/usr/local/bin/payments-dev", "demo", "--against", "http://transfers:8080", "--ledger", "http://ledger:8081",
				"--key", "/home/nonroot/auth/signing-key.jwk"},
			env: map[string]string{"AUTH_ISSUER": "paysuite-dev", "AUTH_AUDIENCE": "paysuite"},
		},
		{
			service: "auth-keygen",
			command: types.ShellCommand{suiteBinary, "auth", "keygen", "--out", "/home/nonroot/auth", "--keep"},
		},
	} {
		t.Run(tc.service, func(t *testing.T) {
			s := composeService(t, p, tc.service)
			if diff := cmp.Diff(tc.command, s.Command); diff != "" {
				t.Errorf("command mismatch (-want +got):\n%s", diff)
			}
			for name, want := range tc.env {
				if got := env(s, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			// A one-shot that is restarted never completes.
			if s.Restart != "" && s.Restart != types.RestartPolicyNo {
				t.Errorf("restart = %q, want no", s.Restart)
			}
		})
	}
}

// The init script is mounted where the postgres image runs it, and it
// creates exactly the databases and roles that the services' DATABASE_URLs
// name, with the same passwords.
func TestComposePostgresInit(t *testing.T) {
	p := composeProject(t)
	root := repoRoot(t)
	pg := composeService(t, p, "postgres")
	initDir := filepath.Join(root, "deploy", "compose", "initdb")
	var mounted bool
	for _, v := range pg.Volumes {
		if v.Type == types.VolumeTypeBind && v.Source == initDir && v.Target == "/docker-entrypoint-initdb.d" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("%s is not bind-mounted on /docker-entrypoint-initdb.d: %+v", initDir, pg.Volumes)
	}
	if env(pg, "POSTGRES_PASSWORD") == "" {
		t.Error("POSTGRES_PASSWORD is empty: the postgres image refuses to start")
	}

	script := readInitScript(t)
	wantRoles := map[string]string{}
	wantDBs := map[string]string{}
	for _, svc := range services {
		u, err := url.Parse(env(composeService(t, p, svc.Name), "DATABASE_URL"))
		if err != nil {
			t.Fatal(err)
		}
		pw, _ := u.User.Password()
		wantRoles[u.User.Username()] = pw
		wantDBs[strings.TrimPrefix(u.Path, "/")] = u.User.Username()
	}
	if diff := cmp.Diff(wantRoles, script.roles); diff != "" {
		t.Errorf("roles (name -> password) mismatch (-DATABASE_URLs +init script):\n%s", diff)
	}
	if diff := cmp.Diff(wantDBs, script.databases); diff != "" {
		t.Errorf("databases (name -> owner) mismatch (-DATABASE_URLs +init script):\n%s", diff)
	}
}

// The console reads the four services over HTTP on the compose network,
// publishes 8084, trusts the same token issuer as the services, and holds
// no database URL or Kafka credential.
func TestComposeConsole(t *testing.T) {
	p := composeProject(t)
	s := composeService(t, p, "console")
	if diff := cmp.Diff(types.ShellCommand{"/usr/local/bin/console"}, s.Command); diff != "" {
		t.Errorf("command mismatch (-want +got):\n%s", diff)
	}
	var ports []string
	for _, port := range s.Ports {
		ports = append(ports, port.Published+":"+strconv.FormatUint(uint64(port.Target), 10))
	}
	if diff := cmp.Diff([]string{"8084:8084"}, ports); diff != "" {
		t.Errorf("ports mismatch (-want +got):\n%s", diff)
	}
	known := knownEnv(t)
	for name := range s.Environment {
		if !known[name] {
			t.Errorf("environment variable %s is read by no suite program", name)
		}
		if strings.HasPrefix(name, "DATABASE_") || strings.HasPrefix(name, "KAFKA_") {
			t.Errorf("the console has %s: it must reach the services only over HTTP", name)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"CONSOLE_HTTP_ADDR", ":8084"},
		{"CONSOLE_TRANSFERS_URL", "http://transfers:8080"},
		{"CONSOLE_LEDGER_URL", "http://ledger:8081"},
		{"CONSOLE_ANTIFRAUD_URL", "http://antifraud:8082"},
		{"CONSOLE_NOTIFICATIONS_URL", "http://notifications:8083"},
		{"DEV_INSECURE_HTTP", "true"},
		{"AUTH_JWKS_FILE", env(composeService(t, p, "transfers"), "AUTH_JWKS_FILE")},
		{"AUTH_ISSUER", env(composeService(t, p, "transfers"), "AUTH_ISSUER")},
	} {
		if got := env(s, tc.name); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}
	h := s.HealthCheck
	if h == nil || h.Disable {
		t.Fatal("no healthcheck")
	}
	if diff := cmp.Diff(types.HealthCheckTest{"CMD", suiteBinary, "probe", "http://localhost:8084/readyz"}, h.Test); diff != "" {
		t.Errorf("healthcheck mismatch (-want +got):\n%s", diff)
	}
}
