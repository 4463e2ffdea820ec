package platform_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paysuite/payments/migrations"
	"github.com/paysuite/payments/pkg/auth/authtest"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/pgtest"
	"github.com/paysuite/payments/test/support/poll"
)

// /readyz names the failing check and never the driver's error (host,
// port, user, database), which goes to the log instead.
func TestReadyzNamesTheCheckNotTheDriverError(t *testing.T) {
	t.Parallel()
	dsn, dbProxy := netfault.PostgresURL(t, pgtest.NewDSN(t, migrations.ForService("transfers")...))
	kafkaProxy := netfault.NewProxy(t, kafkatest.Brokers(t)[0])
	lw := &logtest.Buffer{}
	log := slog.New(slog.NewTextHandler(lw, nil))
	b := mustOpenService(t, platform.Config{
		Service: "transfers", DatabaseURL: dsn, DBMaxConns: 4, MigrateOnStart: true,
		// Every broker through the proxy: the producer connects to the
		// brokers the metadata names, not only to the seed.
		Kafka: broker.Config{Brokers: []string{kafkaProxy.Addr()}, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, kafkaProxy.Addr())
		}},
		Auth: authtest.New(t).Config(),
	}, log)
	probe(t, b)
	srv := httptest.NewServer(b.router)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(dsn)
	secrets := []string{dbProxy.Addr(), kafkaProxy.Addr(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), "dial", "refused"}

	readyz := func() (int, httpapi.Problem, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/readyz", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		var p httpapi.Problem
		_ = json.Unmarshal(body, &p)
		return res.StatusCode, p, string(body)
	}
	poll.Until(t, 10*time.Second, "/readyz 200 before any fault", func() (bool, string) {
		status, _, body := readyz()
		return status == http.StatusOK, body
	})
	for _, tc := range []struct {
		check string
		proxy *netfault.Proxy
	}{
		{"database", dbProxy},
		{"kafka", kafkaProxy},
	} {
		t.Run(tc.check, func(t *testing.T) {
			tc.proxy.Cut()
			defer func() { // the next check starts ready
				tc.proxy.Restore()
				poll.Until(t, 10*time.Second, "/readyz 200 after the restore", func() (bool, string) {
					status, _, body := readyz()
					return status == http.StatusOK, body
				})
			}()
			var p httpapi.Problem
			var body string
			poll.Until(t, 10*time.Second, "/readyz 503", func() (bool, string) {
				var status int
				status, p, body = readyz()
				return status == http.StatusServiceUnavailable, body
			})
			if want := "not ready: " + tc.check; p.Detail != want {
				t.Errorf("detail = %q, want %q", p.Detail, want)
			}
			for _, s := range secrets {
				if s != "" && strings.Contains(body, s) {
					t.Errorf("/readyz body shows %q: %s", s, body)
				}
			}
		})
	}
	if logged := lw.String(); !strings.Contains(logged, "not ready") {
		t.Errorf("the cause was not logged:\n%s", logged)
	}
}
