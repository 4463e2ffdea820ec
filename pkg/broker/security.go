package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SASL mechanisms of KAFKA_SASL_MECHANISM.
const (
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismPlain       = "PLAIN"
)

// Variables read by SecurityFromEnv.
const (
	EnvSASLMechanism    = "KAFKA_SASL_MECHANISM"
	EnvSASLUsername     = "KAFKA_SASL_USERNAME"
	EnvSASLPassword     = "KAFKA_SASL_PASSWORD"      //nolint:gosec // a variable's name, not a credential
	EnvSASLPasswordFile = "KAFKA_SASL_PASSWORD_FILE" //nolint:gosec // a variable's name, not a credential
	EnvTLS              = "KAFKA_TLS"
	EnvTLSCAFile        = "KAFKA_TLS_CA_FILE"
	EnvTLSCertFile      = "KAFKA_TLS_CERT_FILE"
	EnvTLSKeyFile       = "KAFKA_TLS_KEY_FILE"
)

// Security says how the suite's Kafka clients authenticate (SASL) and
// encrypt (TLS). The zero value is plaintext without credentials, the
// development default.
type Security struct {
	// SASL is the credential; the zero value sends none.
	SASL SASL
	// TLS, when not nil, encrypts every connection and verifies the
	// brokers' certificates with it. The server name is the broker's host
	// when ServerName is empty.
	TLS *tls.Config
}

// SecuritySettings are the Kafka security variables as declared and read;
// Security builds the Security they describe.
type SecuritySettings struct {
	Mechanism    string `env:"KAFKA_SASL_MECHANISM" help:"SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN (PLAIN only with KAFKA_TLS=true); empty: no SASL"`
	Username     string `env:"KAFKA_SASL_USERNAME" help:"the service's Kafka principal; required with a mechanism"`
	Password     string `env:"KAFKA_SASL_PASSWORD" secret:"true" trim:"false" help:"its password; prefer KAFKA_SASL_PASSWORD_FILE"`
	PasswordFile string `env:"KAFKA_SASL_PASSWORD_FILE" help:"a file holding the password (a mounted secret; a trailing newline is ignored)"`
	TLS          bool   `env:"KAFKA_TLS" envDefault:"false" help:"true: TLS to the brokers, certificates verified"`
	CAFile       string `env:"KAFKA_TLS_CA_FILE" help:"PEM file of the CA certificates of the brokers (default: the system roots; needs KAFKA_TLS=true)"`
	CertFile     string `env:"KAFKA_TLS_CERT_FILE" help:"client certificate (PEM) for brokers that require mutual TLS; with KAFKA_TLS_KEY_FILE"`
	KeyFile      string `env:"KAFKA_TLS_KEY_FILE" help:"the client certificate's private key (PEM)"`
}

// SecurityFromEnv reads the SecuritySettings from getenv and builds their
// Security. Every problem is reported at once (see
// SecuritySettings.Security).
func SecurityFromEnv(getenv func(string) string) (Security, error) {
	var s SecuritySettings
	err := envconfig.Parse(getenv, &s)
	sec, serr := s.Security()
	return sec, errors.Join(err, serr)
}

// Security reads the password file and the TLS files and builds the
// Security. Every problem is reported at once, each naming its variable and
// never its value; a setting that would silently fall back to plaintext (a
// CA file without KAFKA_TLS, a user name without a mechanism, PLAIN without
// TLS) is a problem too.
func (s SecuritySettings) Security() (Security, error) {
	var sec Security
	var errs []error

	mechanism := strings.ToUpper(s.Mechanism)
	username := s.Username
	password := s.Password // passwords are not trimmed
	passwordFile := s.PasswordFile
	if password != "" && passwordFile != "" {
		errs = append(errs, fmt.Errorf("%s and %s are both set: set one", EnvSASLPassword, EnvSASLPasswordFile))
	}
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile) //nolint:gosec // the operator names the secret's file
		switch {
		case err != nil:
			errs = append(errs, fileError(EnvSASLPasswordFile, err))
		default:
			// A secret file usually ends with a newline the password does
			// not have.
			password = strings.TrimRight(string(b), "\r\n")
			if password == "" {
				errs = append(errs, fmt.Errorf("%s: the file is empty", EnvSASLPasswordFile))
			}
		}
	}
	tlsOn := s.TLS
	switch mechanism {
	case "":
		if username != "" || password != "" || passwordFile != "" {
			errs = append(errs, fmt.Errorf("%s is unset but a SASL username or password is set: set the mechanism (SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)", EnvSASLMechanism))
		}
	case MechanismScramSHA512, MechanismScramSHA256, MechanismPlain:
		if username == "" {
			errs = append(errs, fmt.Errorf("%s is required with %s", EnvSASLUsername, EnvSASLMechanism))
		}
		if password == "" && passwordFile == "" {
			errs = append(errs, fmt.Errorf("%s or %s is required with %s", EnvSASLPassword, EnvSASLPasswordFile, EnvSASLMechanism))
		}
		if mechanism == MechanismPlain && !tlsOn {
			errs = append(errs, fmt.Errorf("%s=PLAIN sends the password in clear: it needs %s=true", EnvSASLMechanism, EnvTLS))
		}
		if username != "" && password != "" {
			sasl, err := NewSASL(mechanism, username, password)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", EnvSASLUsername, EnvSASLPassword, err))
			}
			sec.SASL = sasl
		}
	default:
		errs = append(errs, fmt.Errorf("%s: unsupported mechanism (want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)", EnvSASLMechanism))
	}

	if !tlsOn {
		for _, f := range []struct{ name, value string }{{EnvTLSCAFile, s.CAFile}, {EnvTLSCertFile, s.CertFile}, {EnvTLSKeyFile, s.KeyFile}} {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s is set but %s is not true", f.name, EnvTLS))
			}
		}
		return sec, errors.Join(errs...)
	}
	cfg, tlsErrs := tlsConfig(s.CAFile, s.CertFile, s.KeyFile)
	errs = append(errs, tlsErrs...)
	if len(tlsErrs) == 0 {
		sec.TLS = cfg
	}
	return sec, errors.Join(errs...)
}

// LoadTLS returns the TLS configuration that trusts the CA certificates of
// the PEM file caFile (the system's roots when empty) and presents the
// client certificate certFile/keyFile when both are given.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg, errs := tlsConfig(caFile, certFile, keyFile)
	return cfg, errors.Join(errs...)
}

func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, []error) {
	var errs []error
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile) //nolint:gosec // the operator names the CA file
		switch {
		case err != nil:
			errs = append(errs, fileError(EnvTLSCAFile, err))
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("%s: the file holds no PEM certificate", EnvTLSCAFile))
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				errs = append(errs, fmt.Errorf("%s/%s: cannot read: %w", EnvTLSCertFile, EnvTLSKeyFile, pe.Err))
			} else {
				errs = append(errs, fmt.Errorf("%s/%s: not a PEM certificate and matching key", EnvTLSCertFile, EnvTLSKeyFile))
			}
		}
		cfg.Certificates = []tls.Certificate{pair}
	case certFile != "":
		errs = append(errs, fmt.Errorf("%s is set without %s", EnvTLSCertFile, EnvTLSKeyFile))
	case keyFile != "":
		errs = append(errs, fmt.Errorf("%s is set without %s", EnvTLSKeyFile, EnvTLSCertFile))
	}
	return cfg, errs
}

// fileError says why the file named by variable name cannot be read,
// without its path or content.
func fileError(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: cannot read the file: %w", name, err)
}

// Transport returns a kafka-go transport with the configuration's dialer,
// TLS and SASL, for the kafka-go admin requests (CreateTopics, CreateACLs,
// Check) and for tests that write topics with kafka-go.
func (c Config) Transport() *kafka.Transport {
	t := &kafka.Transport{
		DialTimeout: 5 * time.Second,
		IdleTimeout: 30 * time.Second,
		MetadataTTL: 10 * time.Second,
		TLS:         c.Security.TLS,
	}
	if c.Dial != nil {
		t.Dial = c.Dial
	}
	if c.Security.SASL.Enabled() {
		t.SASL = c.Security.SASL.kafkaGoMechanism()
	}
	return t
}

// Dialer returns a kafka-go dialer with the configuration's dial function,
// TLS and SASL, for kafka.Reader and direct connections.
func (c Config) Dialer() *kafka.Dialer {
	d := &kafka.Dialer{Timeout: 5 * time.Second, DualStack: true, TLS: c.Security.TLS}
	if c.Dial != nil {
		d.DialFunc = c.Dial
	}
	if c.Security.SASL.Enabled() {
		d.SASLMechanism = c.Security.SASL.kafkaGoMechanism()
	}
	return d
}

// KgoSecurityOpts returns the franz-go (kgo) options of the configuration:
// the SASL mechanism, and the TLS dialer. When Dial is set (tests), the
// options include a kgo.Dialer that wraps it (with TLS on top when
// configured), so callers must not add a kgo.Dialer of their own.
func (c Config) KgoSecurityOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.Security.SASL.Enabled() {
		if _, err := c.Security.SASL.kafkaGo(); err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(c.Security.SASL.kgo()))
	}
	tlsCfg := c.Security.TLS
	switch {
	case c.Dial != nil && tlsCfg == nil:
		opts = append(opts, kgo.Dialer(c.Dial))
	case c.Dial != nil:
		dial := c.Dial
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			conn, err := dial(ctx, network, host)
			if err != nil {
				return nil, err
			}
			cfg := tlsCfg.Clone()
			if cfg.ServerName == "" {
				if h, _, err := net.SplitHostPort(host); err == nil {
					cfg.ServerName = h
				}
			}
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				_ = conn.Close()
				return nil, err
			}
			return tc, nil
		}))
	case tlsCfg != nil:
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	return opts, nil
}

// Check opens one authenticated connection to the first broker that
// answers (TCP, then TLS, then SASL) and closes it: a wrong password or an
// untrusted certificate shows here, not only on the first write.
func Check(ctx context.Context, cfg Config) error {
	if len(cfg.Brokers) == 0 {
		return errors.New("no brokers configured")
	}
	d := cfg.Dialer()
	var errs []error
	for _, addr := range cfg.Brokers {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
