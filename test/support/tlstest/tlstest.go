// Package tlstest makes throwaway certificate authorities for tests: a CA
// and server or client certificates it signs, written as PEM files, so a
// test can run a real server (Kafka, PostgreSQL) with TLS and a client that
// verifies it.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority.
type CA struct {
	// CertFile is the CA certificate as a PEM file; CertPEM its content.
	CertFile string
	CertPEM  []byte

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

// Pair is a certificate and its key as PEM files (and their content).
type Pair struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
}

// NewCA makes a CA named name, valid for a day, with its files in a
// temporary folder of tb.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	ca, err := New(tb.TempDir(), name)
	if err != nil {
		tb.Fatalf("tlstest: %v", err)
	}
	return ca
}

// New makes a CA named name, valid for a day, writing its files (and those
// of the certificates it issues) under dir. It is NewCA for code that has
// no testing.TB (a TestMain).
func New(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"paysuite tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	ca := &CA{cert: cert, key: key, dir: dir}
	ca.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if ca.CertFile, err = write(dir, name+"-ca.pem", ca.CertPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// Server issues a server certificate for hosts (DNS names or IP
// addresses). Its key is an unencrypted PKCS #8 PEM ("PRIVATE KEY"), the
// form both Java (Kafka) and PostgreSQL read.
func (ca *CA) Server(tb testing.TB, name string, hosts ...string) Pair {
	tb.Helper()
	p, err := ca.Issue(name, x509.ExtKeyUsageServerAuth, hosts...)
	if err != nil {
		tb.Fatalf("tlstest: %v", err)
	}
	return p
}

// Client issues a client certificate for name.
func (ca *CA) Client(tb testing.TB, name string) Pair {
	tb.Helper()
	p, err := ca.Issue(name, x509.ExtKeyUsageClientAuth)
	if err != nil {
		tb.Fatalf("tlstest: %v", err)
	}
	return p
}

// Issue issues a certificate for name with usage, valid for hosts.
func (ca *CA) Issue(name string, usage x509.ExtKeyUsage, hosts ...string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("issue certificate for %s: %w", name, err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("marshal key: %w", err)
	}
	p := Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
	dir, err := os.MkdirTemp(ca.dir, name+"-*")
	if err != nil {
		return Pair{}, err
	}
	if p.CertFile, err = write(dir, "cert.pem", p.CertPEM); err != nil {
		return Pair{}, err
	}
	if p.KeyFile, err = write(dir, "key.pem", p.KeyPEM); err != nil {
		return Pair{}, err
	}
	return p, nil
}

func serial() *big.Int {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return new(big.Int).SetBytes(b[:])
}

func write(dir, name string, data []byte) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}
