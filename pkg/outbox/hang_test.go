package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/test/support/logtest"
	"github.com/paysuite/payments/test/support/netfault"
	"github.com/paysuite/payments/test/support/poll"
)

// A relay waiting for the broker probes it through the database; a probe
// stuck on a server that hangs (its connections open, no answer) fails
// within postgres.CallTimeout, so that the next one reconnects. Once the
// server answers again and the broker is back, the probe and the resume
// make the events due long before their backoff ends, and they are sent.
func TestRelayProbeOnAHungServer(t *testing.T) {
	t.Parallel()
	e := newDBEnv(t)
	dsn, proxy := netfault.PostgresURL(t, e.db.Config().ConnString())
	pdb, err := postgres.Open(context.Background(), dsn, 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pdb.Close)
	var down atomic.Bool
	down.Store(true)
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	log := newSendLog()
	log.fail = func(broker.Record) error {
		if down.Load() {
			return unreachable
		}
		return nil
	}
	cfg := fastRelay("hung")
	cfg.BackoffBase, cfg.BackoffMax = time.Minute, time.Minute // a failed event waits 30 to 60 s
	var logs logtest.Buffer
	startRelay(t, outbox.NewRelay(outbox.New(pdb), log, cfg,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil))

	ids := e.enqueue(t, payload{"a", 1}, payload{"b", 2}, payload{"c", 3})
	poll.Until(t, 20*time.Second, "every event failed for want of the broker", func() (bool, string) {
		n := count(t, e.db, `SELECT count(*) FROM outbox_event WHERE waits_for_broker AND next_attempt_at > now() + interval '20 seconds'`)
		return n == len(ids), fmt.Sprintf("%d of %d waiting", n, len(ids))
	})
	proxy.Hang()
	poll.Until(t, postgres.CallTimeout+5*time.Second, "the probe on the hung server failed", func() (bool, string) {
		return strings.Contains(logs.String(), "outbox broker probe failed"), ""
	})
	down.Store(false)
	proxy.Resume()
	poll.Until(t, 20*time.Second, "every event sent after the server answered again", func() (bool, string) {
		sent := 0
		for _, id := range ids {
			sent += min(log.sends(id), 1)
		}
		return sent == len(ids), fmt.Sprintf("%d of %d sent", sent, len(ids))
	})
}
