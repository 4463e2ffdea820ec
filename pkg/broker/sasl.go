package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	kgoplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kgoscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SASL is one principal's credential. Build it with NewSASL; its fields are
// unexported so that printing a Config (%v, slog) never shows the password.
type SASL struct {
	mechanism string
	username  string
	password  string
}

// NewSASL returns the credential of username for mechanism (one of the
// Mechanism constants). The password never appears in errors or logs.
func NewSASL(mechanism, username, password string) (SASL, error) {
	var errs []error
	switch mechanism {
	case MechanismScramSHA512, MechanismScramSHA256, MechanismPlain:
	default:
		errs = append(errs, errors.New("unsupported SASL mechanism (want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)"))
	}
	if username == "" {
		errs = append(errs, errors.New("SASL username is empty"))
	}
	if password == "" {
		errs = append(errs, errors.New("SASL password is empty"))
	}
	if err := errors.Join(errs...); err != nil {
		return SASL{}, err
	}
	s := SASL{mechanism: mechanism, username: username, password: password}
	if _, err := s.kafkaGo(); err != nil {
		return SASL{}, err
	}
	return s, nil
}

// Enabled reports whether the credential is set.
func (s SASL) Enabled() bool { return s.mechanism != "" }

// Mechanism is the SASL mechanism name, "" when disabled.
func (s SASL) Mechanism() string { return s.mechanism }

// Username is the principal's name, "" when disabled.
func (s SASL) Username() string { return s.username }

// String describes the credential without its password.
func (s SASL) String() string {
	if !s.Enabled() {
		return "none"
	}
	return s.mechanism + " as " + s.username
}

// GoString is String, for %#v.
func (s SASL) GoString() string { return "broker.SASL(" + s.String() + ")" }

// LogValue keeps the password out of structured logs.
func (s SASL) LogValue() slog.Value { return slog.StringValue(s.String()) }

// kafkaGo returns kafka-go's mechanism, nil when disabled.
func (s SASL) kafkaGo() (sasl.Mechanism, error) {
	switch s.mechanism {
	case "":
		return nil, nil
	case MechanismPlain:
		return plain.Mechanism{Username: s.username, Password: s.password}, nil
	case MechanismScramSHA256, MechanismScramSHA512:
		algo := scram.SHA512
		if s.mechanism == MechanismScramSHA256 {
			algo = scram.SHA256
		}
		m, err := scram.Mechanism(algo, s.username, s.password)
		if err != nil {
			// xdg-go/scram fails only on SASLprep of the user name or
			// password; its error quotes neither.
			return nil, fmt.Errorf("SASL %s credential: %w", s.mechanism, err)
		}
		return m, nil
	}
	return nil, errors.New("unsupported SASL mechanism")
}

// kafkaGoMechanism is kafkaGo for constructors that cannot fail: a
// credential NewSASL accepted always builds, and one that does not fails
// every connection with its error instead of connecting without it.
func (s SASL) kafkaGoMechanism() sasl.Mechanism {
	m, err := s.kafkaGo()
	if err != nil {
		return failingMechanism{name: s.mechanism, err: err}
	}
	return m
}

type failingMechanism struct {
	name string
	err  error
}

func (f failingMechanism) Name() string { return f.name }
func (f failingMechanism) Start(context.Context) (sasl.StateMachine, []byte, error) {
	return nil, nil, f.err
}

// kgo returns franz-go's mechanism, nil when disabled.
func (s SASL) kgo() kgosasl.Mechanism {
	switch s.mechanism {
	case MechanismPlain:
		return kgoplain.Auth{User: s.username, Pass: s.password}.AsMechanism()
	case MechanismScramSHA256:
		return kgoscram.Auth{User: s.username, Pass: s.password}.AsSha256Mechanism()
	case MechanismScramSHA512:
		return kgoscram.Auth{User: s.username, Pass: s.password}.AsSha512Mechanism()
	}
	return nil
}
