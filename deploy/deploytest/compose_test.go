package deploytest

import (
	"context"
	"fmt"
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
	"github.com/paysuite/payments/test/support/repo"
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
	p, err := loadCompose(tb, filepath.Join(repo.Path(tb), "docker-compose.yml"))
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
	want := []string{"antifraud", "auth-keygen", "console", "demo", "kafka", "kafka-init", "ledger", "notifications", "postgres",
		"transfer-keygen", "transfers"}
	if diff := cmp.Diff(want, sortedKeys(p.Services)); diff != "" {
		t.Errorf("services mismatch (-want +got):\n%s", diff)
	}
}

func TestComposeImages(t *testing.T) {
	p := composeProject(t)
	root := repo.Path(t)
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
	t.Run("transfers reads the ledger", func(t *testing.T) {
		s := composeService(t, p, "transfers")
		if got := env(s, "TRANSFERS_LEDGER_URL"); got != "http://ledger:8081" || env(s, "DEV_INSECURE_HTTP") != "true" {
			t.Errorf("TRANSFERS_LEDGER_URL = %q, DEV_INSECURE_HTTP = %q; want http://ledger:8081 with the development switch", got, env(s, "DEV_INSECURE_HTTP"))
		}
	})
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
	serviceDeps := map[string]string{"postgres": healthy, "kafka-init": completed, "auth-keygen": completed, "transfer-keygen": completed}
	want := map[string]map[string]string{
		"postgres":        {},
		"kafka":           {},
		"kafka-init":      {"kafka": healthy},
		"auth-keygen":     {},
		"transfer-keygen": {},
		"transfers":       serviceDeps,
		"ledger":          serviceDeps,
		"antifraud":       serviceDeps,
		"notifications":   serviceDeps,
		"console":         {"transfers": healthy, "ledger": healthy, "antifraud": healthy, "notifications": healthy},
		"demo":            {"transfers": healthy, "ledger": healthy, "antifraud": healthy, "notifications": healthy, "console": healthy},
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
		{"KAFKA_CONTROLLER_QUORUM_VOTERS", "1@127.0.0.1:9093"},
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
		{"KAFKA_SUPER_USERS", "User:admin;User:controller"},
		{"KAFKA_SASL_MECHANISM_CONTROLLER_PROTOCOL", "PLAIN"},
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
		name, _, _ := strings.Cut(m, ":")
		protocols[name] = true
	}
	for _, problem := range kafkaSecurityProblems(s) {
		t.Error(problem)
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
	script, err := os.ReadFile(filepath.Join(repo.Path(t), "deploy", "compose", "kafka", "start.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "for user in admin transfers ledger antifraud notifications; do") {
		t.Error("start.sh does not create the SCRAM user of every service")
	}
	// The controller principal's PLAIN login, on the controller listener.
	if !strings.Contains(string(script), `listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"controller\"`) ||
		!strings.Contains(string(script), "listener.name.controller.sasl.enabled.mechanisms=PLAIN") {
		t.Error("start.sh does not configure the controller listener's PLAIN login as controller")
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
			command: types.ShellCommand{suiteBinary, "auth", "keygen", "--out", "/home/nonroot/auth", "--jwks-out", "/home/nonroot/jwks", "--keep"},
		},
		{
			service: "transfer-keygen",
			command: types.ShellCommand{suiteBinary, "auth", "transfer-keygen", "--out", "/home/nonroot/transfer-key",
				"--public-out", "/home/nonroot/transfer-jwks", "--keep"},
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
	root := repo.Path(t)
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

// The transfer authorization key: transfer-keygen writes the private key
// into the transfer-key volume and its public JWKS into transfer-jwks; the
// transfers service alone mounts transfer-key and reads the key from there,
// the ledger alone mounts transfer-jwks and reads the JWKS from there, both
// read-only. A container that mounted the private key could sign debits of
// any account. (Two volumes, not subpaths of one: volume subpaths need
// Docker Engine 26, and Debian 12's engine is 20.10.)
func TestComposeTransferAuthorizationKey(t *testing.T) {
	p := composeProject(t)
	want := map[string][]string{
		"transfer-key":  {"transfer-keygen", "transfers"},
		"transfer-jwks": {"ledger", "transfer-keygen"},
	}
	got := map[string][]string{}
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if _, ok := want[v.Source]; !ok {
				continue
			}
			got[v.Source] = append(got[v.Source], name)
			if name != "transfer-keygen" && !v.ReadOnly {
				t.Errorf("%s mounts %s writable", name, v.Source)
			}
			if name == "transfers" && !strings.HasPrefix(env(s, "TRANSFERS_AUTHORIZATION_KEY_FILE"), v.Target+"/") {
				t.Errorf("TRANSFERS_AUTHORIZATION_KEY_FILE = %q, not under %s", env(s, "TRANSFERS_AUTHORIZATION_KEY_FILE"), v.Target)
			}
			if name == "ledger" && !strings.HasPrefix(env(s, "LEDGER_AUTHORIZATION_JWKS_FILE"), v.Target+"/") {
				t.Errorf("LEDGER_AUTHORIZATION_JWKS_FILE = %q, not under %s", env(s, "LEDGER_AUTHORIZATION_JWKS_FILE"), v.Target)
			}
		}
	}
	for _, names := range got {
		slices.Sort(names)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transfer key mounts (volume -> services) mismatch (-want +got):\n%s", diff)
	}
}

// kafkaSecurityProblems lists what lets a container other than the broker
// act on the cluster without a password (docs/security.md): a listener
// that takes unauthenticated clients, ANONYMOUS as a super user, a
// controller listener that other containers reach unauthenticated or that
// is published on the host.
func kafkaSecurityProblems(s types.ServiceConfig) []string {
	var problems []string
	for _, u := range strings.Split(env(s, "KAFKA_SUPER_USERS"), ";") {
		if strings.EqualFold(strings.TrimSpace(u), "User:ANONYMOUS") {
			problems = append(problems, "User:ANONYMOUS is a super user: every unauthenticated connection may do anything")
		}
	}
	protocol := map[string]string{}
	for _, m := range strings.Split(env(s, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"), ",") {
		name, p, _ := strings.Cut(m, ":")
		protocol[name] = p
		if p != "SASL_PLAINTEXT" && p != "SASL_SSL" {
			problems = append(problems, fmt.Sprintf("listener %s is %s: its clients connect unauthenticated, as ANONYMOUS", name, p))
		}
	}
	controllers := strings.Split(env(s, "KAFKA_CONTROLLER_LISTENER_NAMES"), ",")
	for _, l := range strings.Split(env(s, "KAFKA_LISTENERS"), ",") {
		name, addr, _ := strings.Cut(l, "://")
		if !slices.Contains(controllers, name) {
			continue
		}
		host, port, _ := strings.Cut(addr, ":")
		if host != "127.0.0.1" && host != "localhost" && host != "[::1]" {
			problems = append(problems, fmt.Sprintf("controller listener %s binds %q: every container on the network reaches it (bind it to 127.0.0.1)", name, addr))
		}
		for _, p := range s.Ports {
			if strconv.FormatUint(uint64(p.Target), 10) == port {
				problems = append(problems, fmt.Sprintf("controller listener %s is published on the host (port %s)", name, port))
			}
		}
	}
	for _, v := range strings.Split(env(s, "KAFKA_CONTROLLER_QUORUM_VOTERS"), ",") {
		_, addr, _ := strings.Cut(v, "@")
		if host, _, _ := strings.Cut(addr, ":"); host != "127.0.0.1" && host != "localhost" {
			problems = append(problems, fmt.Sprintf("quorum voter %s is not the broker's own loopback", v))
		}
	}
	return problems
}

// The checker catches each unsafe setting: the compose file as it was
// before docs/security.md's "controller" paragraph, and one change at a
// time from the current file.
func TestKafkaSecurityProblemsCatchesUnsafeSettings(t *testing.T) {
	p := composeProject(t)
	good := composeService(t, p, "kafka")
	if problems := kafkaSecurityProblems(good); len(problems) > 0 {
		t.Fatalf("docker-compose.yml's broker: %v", problems)
	}
	with := func(changes map[string]string, ports ...types.ServicePortConfig) types.ServiceConfig {
		s := good
		s.Environment = types.MappingWithEquals{}
		for k, v := range good.Environment {
			s.Environment[k] = v
		}
		for k, v := range changes {
			s.Environment[k] = &v
		}
		s.Ports = append(slices.Clone(good.Ports), ports...)
		return s
	}
	for _, tc := range []struct {
		name string
		bad  types.ServiceConfig
		says string
	}{
		{"the old file", with(map[string]string{
			"KAFKA_LISTENERS":                      "INTERNAL://:9092,CONTROLLER://:9093,EXTERNAL://:9094",
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
			"KAFKA_SUPER_USERS":                    "User:admin;User:ANONYMOUS",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":       "1@kafka:9093",
		}), "ANONYMOUS"},
		{"anonymous super user", with(map[string]string{"KAFKA_SUPER_USERS": "User:admin;User:controller;User:ANONYMOUS"}), "ANONYMOUS is a super user"},
		{"plaintext controller", with(map[string]string{
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
		}), "listener CONTROLLER is PLAINTEXT"},
		{"controller on every address", with(map[string]string{
			"KAFKA_LISTENERS": "INTERNAL://:9092,CONTROLLER://0.0.0.0:9093,EXTERNAL://:9094",
		}), "every container"},
		{"controller published", with(nil, types.ServicePortConfig{Target: 9093, Published: "9093", Protocol: "tcp"}), "published"},
		{"voter on the network name", with(map[string]string{"KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka:9093"}), "quorum voter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := kafkaSecurityProblems(tc.bad)
			if !strings.Contains(strings.Join(problems, "\n"), tc.says) {
				t.Errorf("problems %q do not say %q", problems, tc.says)
			}
		})
	}
}

// signingKeyProblems lists where the compose file lets a container other
// than auth-keygen (which makes the key) and the demo (which signs its
// tokens) see the token signing key, and where a service lacks the public
// JWKS it verifies tokens with (docs/security.md). The key is the volume
// mounted where auth-keygen's --out writes; the JWKS the one of --jwks-out.
func signingKeyProblems(p *types.Project) []string {
	var problems []string
	keygen, ok := p.Services["auth-keygen"]
	if !ok {
		return []string{"no auth-keygen service"}
	}
	flag := func(name string) string {
		for i, a := range keygen.Command {
			if a == name && i+1 < len(keygen.Command) {
				return keygen.Command[i+1]
			}
		}
		return ""
	}
	volumeAt := func(s types.ServiceConfig, dir string) string {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume && strings.HasPrefix(dir+"/", strings.TrimSuffix(v.Target, "/")+"/") {
				return v.Source
			}
		}
		return ""
	}
	keyVolume, jwksVolume := volumeAt(keygen, flag("--out")), volumeAt(keygen, flag("--jwks-out"))
	if keyVolume == "" || jwksVolume == "" || keyVolume == jwksVolume {
		return append(problems, fmt.Sprintf("auth-keygen writes the key (--out %q) and the JWKS (--jwks-out %q) into volumes %q and %q: want two different named volumes",
			flag("--out"), flag("--jwks-out"), keyVolume, jwksVolume))
	}
	for _, name := range sortedKeys(p.Services) {
		s := p.Services[name]
		signs := name == "auth-keygen" || name == "demo"
		var sawJWKS bool
		for _, v := range s.Volumes {
			switch {
			case v.Source == keyVolume && !signs:
				problems = append(problems, fmt.Sprintf("%s mounts the signing key's volume %s at %s", name, keyVolume, v.Target))
			case v.Type == types.VolumeTypeBind && strings.Contains(v.Source, "auth"):
				problems = append(problems, fmt.Sprintf("%s bind-mounts %s: keys come from the volumes only", name, v.Source))
			case v.Source == jwksVolume:
				sawJWKS = true
				if name != "auth-keygen" && !v.ReadOnly {
					problems = append(problems, fmt.Sprintf("%s mounts the JWKS volume writable: it could replace the keys the others trust", name))
				}
			}
		}
		if jwks := env(s, "AUTH_JWKS_FILE"); jwks != "" {
			if !sawJWKS || volumeAt(s, filepath.Dir(jwks)) != jwksVolume {
				problems = append(problems, fmt.Sprintf("%s reads AUTH_JWKS_FILE=%s, which is not in the JWKS volume %s", name, jwks, jwksVolume))
			}
		}
	}
	return problems
}

// Only auth-keygen and the demo see the signing key; the services and
// the console see the public JWKS, read-only. The checker catches the
// compose file as it was (one volume with both, mounted everywhere) and a
// key volume added to one service.
func TestComposeSigningKeyOnlyWhereTokensAreSigned(t *testing.T) {
	p := composeProject(t)
	if problems := signingKeyProblems(p); len(problems) > 0 {
		t.Fatalf("docker-compose.yml: %q", problems)
	}
	for _, svc := range append([]string{"console"}, func() []string {
		var names []string
		for _, s := range services {
			names = append(names, s.Name)
		}
		return names
	}()...) {
		if got := env(composeService(t, p, svc), "AUTH_JWKS_FILE"); got == "" {
			t.Errorf("%s has no AUTH_JWKS_FILE", svc)
		}
	}

	old := `name: x
services:
  auth-keygen:
    image: x
    command: ["/usr/local/bin/payments", "auth", "keygen", "--out", "/home/nonroot/auth", "--keep"]
    volumes: ["auth:/home/nonroot"]
  notifications:
    image: x
    environment: {AUTH_JWKS_FILE: /home/nonroot/auth/jwks.json}
    volumes: ["auth:/home/nonroot:ro"]
volumes: {auth: {}}
`
	leak := `name: x
services:
  auth-keygen:
    image: x
    command: ["/usr/local/bin/payments", "auth", "keygen", "--out", "/home/nonroot/auth", "--jwks-out", "/home/nonroot/jwks", "--keep"]
    volumes: ["key:/home/nonroot/auth", "jwks:/home/nonroot/jwks"]
  notifications:
    image: x
    environment: {AUTH_JWKS_FILE: /home/nonroot/jwks/jwks.json}
    volumes: ["jwks:/home/nonroot/jwks:ro", "key:/home/nonroot/auth:ro"]
  ledger:
    image: x
    environment: {AUTH_JWKS_FILE: /home/nonroot/jwks/jwks.json}
    volumes: ["jwks:/home/nonroot/jwks"]
volumes: {key: {}, jwks: {}}
`
	for _, tc := range []struct {
		name, yaml string
		says       []string
	}{
		{"one volume for both", old, []string{"want two different named volumes"}},
		{"key volume in a service", leak, []string{"notifications mounts the signing key's volume", "ledger mounts the JWKS volume writable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "docker-compose.yml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			bad, err := loadCompose(t, path)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(signingKeyProblems(bad), "\n")
			for _, want := range tc.says {
				if !strings.Contains(got, want) {
					t.Errorf("problems %q do not say %q", got, want)
				}
			}
		})
	}
}

// The local override (make compose-demo) must cover every service of
// docker-compose.yml that builds or pulls an image: one it misses is
// pulled from a registry the machine cannot reach, or built on the
// engine's bridge network, which the private engine does not have.
func TestComposeLocalOverrideCoversEveryImage(t *testing.T) {
	root := repo.Path(t)
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(root, "docker-compose.yml"), filepath.Join(root, "deploy", "compose", "local", "override.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(nil),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml with the local override does not load: %v", err)
	}
	for name, s := range p.Services {
		if s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: pull_policy %q with the local override, want never", name, s.PullPolicy)
		}
		if s.Build != nil && s.Build.Network != "host" {
			t.Errorf("%s: builds on network %q with the local override, want host", name, s.Build.Network)
		}
		if len(s.Ports) > 0 {
			t.Errorf("%s: publishes %d host ports with the local override, want none", name, len(s.Ports))
		}
	}
}
