package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/test/support/repo"
	"github.com/paysuite/payments/test/support/tlstest"
)

// KafkaVersion is the version of the broker jars the harness runs.
const KafkaVersion = "4.3.1"

// EnvKafkaLibs names a folder of Kafka broker jars to run instead of the
// repository's .cache/kafka/<version>/libs.
const EnvKafkaLibs = "TEST_KAFKA_LIBS"

// SecuredAdmin is the super user of a SecuredBroker.
const SecuredAdmin = "admin"

// SecuredBroker is a single-node Kafka (KRaft, broker and controller in one
// JVM) that the test process starts from the Apache jars, secured as
// production is:
//
//   - one SASL_SSL listener on 127.0.0.1 with SCRAM-SHA-512, SCRAM-SHA-256
//     and PLAIN; every user has a credential for each, SCRAM users are
//     written at format time (kafka-storage format --add-scram);
//   - TLS with a certificate for 127.0.0.1 and localhost signed by a
//     throwaway CA the harness makes with crypto/x509 (CA), given to Java as
//     PEM files (ssl.keystore.type=PEM);
//   - KRaft's StandardAuthorizer with allow.everyone.if.no.acl.found=false:
//     a user may do only what an ACL allows. The super users are admin and
//     ANONYMOUS, the latter being the broker's own requests on the
//     controller listener, which stays PLAINTEXT on loopback.
//
// It takes some 20 s to start on a loaded machine: start one per test
// package, in TestMain, and Stop it there.
type SecuredBroker struct {
	// Addr is the SASL_SSL listener, host:port.
	Addr string
	// CA signed the broker's certificate; CA.CertFile is what clients
	// trust (KAFKA_TLS_CA_FILE).
	CA *tlstest.CA
	// Passwords are the users' passwords, admin's included.
	Passwords map[string]string

	dir string
	cmd *exec.Cmd
	// done is closed when the broker process has exited, with its Wait
	// error in exitErr.
	done    chan struct{}
	exitErr error
}

// StartSecured starts a SecuredBroker with the users named (and admin),
// each with a random password, and waits until admin can read its
// metadata. Its files live in a temporary folder that Stop removes.
func StartSecured(ctx context.Context, users ...string) (*SecuredBroker, error) {
	libs, err := KafkaLibs(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "paysuite-kafka-secured-")
	if err != nil {
		return nil, err
	}
	b := &SecuredBroker{dir: dir, Passwords: map[string]string{}}
	ok := false
	defer func() {
		if !ok {
			_ = b.Stop()
		}
	}()
	for _, u := range append([]string{SecuredAdmin}, users...) {
		b.Passwords[u] = randomHex(16)
	}
	if b.CA, err = tlstest.New(dir, "kafka-test"); err != nil {
		return nil, err
	}
	server, err := b.CA.Issue("broker", x509.ExtKeyUsageServerAuth, "127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	// A PEM keystore file holds the private key and the certificate chain.
	keystore := filepath.Join(dir, "broker-keystore.pem")
	if err := os.WriteFile(keystore, append(append([]byte{}, server.KeyPEM...), server.CertPEM...), 0o600); err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		last = b.launch(ctx, libs, keystore)
		if last == nil {
			ok = true
			return b, nil
		}
		if !errors.Is(last, errPortTaken) {
			return nil, last
		}
	}
	return nil, last
}

var errPortTaken = errors.New("a port was taken before the broker bound it")

func (b *SecuredBroker) launch(ctx context.Context, libs, keystore string) error {
	port, cport, err := freePorts()
	if err != nil {
		return err
	}
	data := filepath.Join(b.dir, "data")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	b.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	props := filepath.Join(b.dir, "server.properties")
	if err := os.WriteFile(props, []byte(b.properties(port, cport, data, keystore)), 0o600); err != nil {
		return err
	}
	// The broker outlives ctx (which bounds the start only): no
	// CommandContext for it; Stop ends it.
	java := func(args ...string) *exec.Cmd {
		all := append([]string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
			"-cp", filepath.Join(libs, "*")}, args...)
		cmd := exec.Command("java", all...) //nolint:gosec,noctx // the harness's own command line
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}

	// Format with a random cluster id and the SCRAM credentials.
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	cluster := base64.RawURLEncoding.EncodeToString(id)
	for strings.HasPrefix(cluster, "-") {
		_, _ = rand.Read(id)
		cluster = base64.RawURLEncoding.EncodeToString(id)
	}
	args := []string{"kafka.tools.StorageTool", "format", "--standalone", "-t", cluster, "-c", props}
	for _, u := range b.users() {
		for _, mech := range []string{broker.MechanismScramSHA512, broker.MechanismScramSHA256} {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u, b.Passwords[u]))
		}
	}
	if out, err := java(args...).CombinedOutput(); err != nil {
		return fmt.Errorf("format the secured broker's storage: %w\n%s", err, out)
	}

	logPath := filepath.Join(b.dir, "broker.log")
	logFile, err := os.Create(logPath) //nolint:gosec // the harness's own temp folder
	if err != nil {
		return err
	}
	cmd := java("-Xmx512m", "kafka.Kafka", props)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start the secured broker: %w", err)
	}
	done := make(chan struct{})
	b.cmd, b.done = cmd, done
	go func() {
		err := cmd.Wait()
		_ = logFile.Close()
		b.exitErr = err
		close(done)
	}()

	admin := b.Config(SecuredAdmin)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := probeMetadata(pctx, admin)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-b.done:
			werr := b.exitErr
			b.cmd, b.done = nil, nil
			logText, _ := os.ReadFile(logPath) //nolint:gosec // the harness's own log
			if bytes.Contains(logText, []byte("Address already in use")) {
				return errPortTaken
			}
			return fmt.Errorf("the secured broker exited during start-up (%v); last log lines:\n%s", werr, tail(logText, 40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			logText, _ := os.ReadFile(logPath) //nolint:gosec // the harness's own log
			return fmt.Errorf("the secured broker did not answer within 2m (last: %v); last log lines:\n%s", err, tail(logText, 40))
		}
	}
}

func (b *SecuredBroker) users() []string {
	out := make([]string, 0, len(b.Passwords))
	for u := range b.Passwords {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

func (b *SecuredBroker) properties(port, cport int, data, keystore string) string {
	admin := b.Passwords[SecuredAdmin]
	var plainUsers strings.Builder
	for _, u := range b.users() {
		fmt.Fprintf(&plainUsers, " user_%s=%q", u, b.Passwords[u])
	}
	return fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:%[2]d
listeners=SASL_SSL://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=SASL_SSL://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password=%[3]q;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password=%[3]q;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password=%[3]q%[4]s;
ssl.keystore.type=PEM
ssl.keystore.location=%[5]s
ssl.truststore.type=PEM
ssl.truststore.location=%[6]s
ssl.client.auth=none
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
log.dirs=%[7]s
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
`, port, cport, admin, plainUsers.String(), keystore, b.CA.CertFile, data)
}

// Config is the client configuration of user: its SCRAM-SHA-512
// credential over TLS that trusts the broker's CA.
func (b *SecuredBroker) Config(user string) broker.Config {
	return b.ConfigWith(broker.MechanismScramSHA512, user, b.Passwords[user])
}

// ConfigWith is Config with another mechanism or password.
func (b *SecuredBroker) ConfigWith(mechanism, user, password string) broker.Config {
	s, err := broker.NewSASL(mechanism, user, password)
	if err != nil {
		panic(fmt.Sprintf("kafkatest: SASL credential for %s: %v", user, err))
	}
	tlsCfg, err := broker.LoadTLS(b.CA.CertFile, "", "")
	if err != nil {
		panic(fmt.Sprintf("kafkatest: TLS configuration: %v", err))
	}
	return broker.Config{Brokers: []string{b.Addr}, Security: broker.Security{SASL: s, TLS: tlsCfg}}
}

// Env is the environment of a service that connects as user:
// KAFKA_BROKERS, and KAFKA_SASL_* and KAFKA_TLS_* as a deployment sets
// them, the password as a mounted file.
func (b *SecuredBroker) Env(user string) map[string]string {
	pw := filepath.Join(b.dir, "password-"+user)
	if err := os.WriteFile(pw, []byte(b.Passwords[user]+"\n"), 0o600); err != nil {
		panic(fmt.Sprintf("kafkatest: write the password file: %v", err))
	}
	return map[string]string{
		"KAFKA_BROKERS":            b.Addr,
		"KAFKA_SASL_MECHANISM":     broker.MechanismScramSHA512,
		"KAFKA_SASL_USERNAME":      user,
		"KAFKA_SASL_PASSWORD_FILE": pw,
		"KAFKA_TLS":                "true",
		"KAFKA_TLS_CA_FILE":        b.CA.CertFile,
	}
}

// Stop stops the broker (SIGTERM, then SIGKILL after 30 s) and removes its
// files.
func (b *SecuredBroker) Stop() error {
	var err error
	if b.cmd != nil && b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-b.done: // the exit status of a stopped broker says nothing
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.done
			err = errors.New("the secured broker ignored SIGTERM for 30 s and was killed")
		}
		b.cmd = nil
	}
	if b.dir != "" {
		err = errors.Join(err, os.RemoveAll(b.dir))
	}
	return err
}

// KafkaLibs returns the folder of the broker jars: EnvKafkaLibs, or the
// repository's .cache/kafka/<version>/libs, resolved with Maven from
// test/infra/kafka/pom.xml when missing (as test/infra/with-infra.sh does).
func KafkaLibs(ctx context.Context) (string, error) {
	if v := os.Getenv(EnvKafkaLibs); v != "" {
		return v, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	libs := filepath.Join(root, ".cache", "kafka", KafkaVersion, "libs")
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+KafkaVersion+".jar")); err == nil {
		return libs, nil
	}
	tmp := libs + ".tmp"
	_ = os.RemoveAll(tmp)
	//nolint:gosec // the repository's own POM and cache folder
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(root, "test", "infra", "kafka", "pom.xml"),
		"dependency:copy-dependencies", "-DoutputDirectory="+tmp, "-DincludeScope=runtime")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no Kafka %s jars in %s and Maven could not resolve them (set %s to a folder of them): %w\n%s",
			KafkaVersion, libs, EnvKafkaLibs, err, tail(out, 30))
	}
	if err := os.RemoveAll(libs); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, libs); err != nil {
		return "", err
	}
	return libs, nil
}

// freePorts returns two ports nothing listens on now.
func freePorts() (int, int, error) {
	var ports [2]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := range ports {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// probeMetadata asks the broker for its metadata with cfg's credential.
func probeMetadata(ctx context.Context, cfg broker.Config) error {
	t := cfg.Transport()
	defer t.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: t}
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return err
	}
	if len(meta.Brokers) == 0 {
		return errors.New("no broker registered yet")
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(b []byte, lines int) string {
	s := strings.TrimRight(string(b), "\n")
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
