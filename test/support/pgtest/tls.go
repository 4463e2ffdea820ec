package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/paysuite/payments/test/support/tlstest"
)

// TLSServer is a small PostgreSQL cluster of its own, started for one test
// with TLS on (a server certificate the test made) and pg_hba.conf
// accepting TCP connections only over TLS ("hostssl"). The shared test
// server is never restarted for this: it is a separate initdb on a free
// port, run as the postgres user, stopped and removed when the test ends.
type TLSServer struct {
	// Port is where it listens, on 127.0.0.1.
	Port int
}

// URL is a connection URL for database postgres on the server with the
// given query (e.g. "sslmode=verify-full&sslrootcert=/ca.pem") and host.
func (s *TLSServer) URL(host, query string) string {
	return "postgres://postgres@" + net.JoinHostPort(host, strconv.Itoa(s.Port)) + "/postgres?" + query
}

// StartTLS starts a TLSServer presenting cert (its key must be an
// unencrypted PEM). It needs the Debian PostgreSQL server binaries
// (/usr/lib/postgresql/<version>/bin) and fails the test without them.
func StartTLS(tb testing.TB, cert tlstest.Pair) *TLSServer {
	tb.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		tb.Fatal("pgtest: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install the postgresql package")
	}
	sort.Strings(bins)
	bin := filepath.Dir(bins[len(bins)-1])

	dir, err := os.MkdirTemp("", "paysuite-pgtls-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	uid, gid := -1, -1
	if os.Getuid() == 0 {
		// PostgreSQL refuses to run as root: its files belong to postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("pgtest: running as root and no postgres user: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	asPG := func(args ...string) *exec.Cmd {
		if os.Getuid() == 0 {
			args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...) //nolint:gosec,noctx // the harness's own command line
		cmd.Dir = "/"
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := asPG(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync",
		"--encoding=UTF8", "--locale=C").CombinedOutput(); err != nil {
		tb.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	// TCP only over TLS; the Unix socket (for pg_ctl) stays open.
	files := map[string][]byte{
		"server.crt":  cert.CertPEM,
		"server.key":  cert.KeyPEM,
		"pg_hba.conf": []byte("local all all trust\nhostssl all all 127.0.0.1/32 trust\n"),
	}
	for name, content := range files {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			tb.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Chown(p, uid, gid); err != nil {
				tb.Fatal(err)
			}
		}
	}
	s := &TLSServer{}
	var lastOut []byte
	for attempt := 0; attempt < 3; attempt++ {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=server.crt "+
			"-c ssl_key_file=server.key -c fsync=off -c max_connections=20", s.Port, dir)
		out, err := asPG(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60",
			"start", "-o", opts).CombinedOutput()
		if err == nil {
			tb.Cleanup(func() {
				if out, err := asPG(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
					tb.Errorf("pgtest: stop the TLS server: %v\n%s", err, out)
				}
			})
			return s
		}
		lastOut = out
		logText, _ := os.ReadFile(filepath.Join(dir, "postgres.log")) //nolint:gosec // the harness's own log
		if !errors.Is(err, exec.ErrNotFound) && !strings.Contains(string(logText), "Address already in use") {
			tb.Fatalf("pgtest: start the TLS server: %v\n%s\n%s", err, out, logText)
		}
	}
	tb.Fatalf("pgtest: no free port for the TLS server: %s", lastOut)
	return nil
}
