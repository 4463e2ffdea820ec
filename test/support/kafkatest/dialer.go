package kafkatest

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
)

// Dialer opens the TCP connections of one Kafka client and can cut them: it
// simulates "the broker is down" for the clients built on it while the
// shared broker keeps serving everyone else.
//
// Give it to kafka-go through [Dialer.Transport] (Writer, Client) or
// [Dialer.KafkaDialer] (Reader, kafka.DialContext). A Dialer starts up.
type Dialer struct {
	tb     testing.TB
	dialer net.Dialer

	mu    sync.Mutex
	down  bool
	conns map[*trackedConn]struct{}
}

// NewDialer returns a Dialer that is up. Connections still open when the test
// ends are closed.
func NewDialer(tb testing.TB) *Dialer {
	tb.Helper()
	d := &Dialer{tb: tb, conns: map[*trackedConn]struct{}{}}
	tb.Cleanup(d.closeAll)
	return d
}

// DialContext dials like net.Dialer, or, while the Dialer is down, fails the
// way a stopped broker does (connection refused). Its signature fits
// kafka.Transport.Dial and kafka.Dialer.DialFunc.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if d.isDown() {
		return nil, refused(network, address)
	}
	c, err := d.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down { // went down while we were dialing
		_ = c.Close()
		return nil, refused(network, address)
	}
	d.conns[tc] = struct{}{}
	return tc, nil
}

// Down refuses new connections and closes every connection this Dialer
// handed out, so requests in flight fail and clients must reconnect.
func (d *Dialer) Down() {
	d.mu.Lock()
	d.down = true
	d.mu.Unlock()
	d.closeAll()
}

// Up lets new connections through again.
func (d *Dialer) Up() {
	d.mu.Lock()
	d.down = false
	d.mu.Unlock()
}

// Transport returns a kafka-go Transport that dials through d, for
// kafka.Writer and kafka.Client. Its idle connections are closed when the
// test ends.
func (d *Dialer) Transport() *kafka.Transport {
	t := d.config().Transport()
	d.tb.Cleanup(t.CloseIdleConnections)
	return t
}

// KafkaDialer returns a kafka-go Dialer that dials through d, for
// kafka.ReaderConfig.Dialer and kafka.Dialer's own methods.
func (d *Dialer) KafkaDialer() *kafka.Dialer {
	return d.config().Dialer()
}

// config is a broker configuration whose connections d dials: pkg/broker
// builds the clients.
func (d *Dialer) config() broker.Config { return broker.Config{Dial: d.DialContext} }

func (d *Dialer) isDown() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.down
}

func (d *Dialer) closeAll() {
	d.mu.Lock()
	conns := d.conns
	d.conns = map[*trackedConn]struct{}{}
	d.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

func (d *Dialer) forget(c *trackedConn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}

func refused(network, address string) error {
	return &net.OpError{Op: "dial", Net: network, Addr: stringAddr{network, address}, Err: syscall.ECONNREFUSED}
}

// trackedConn is a connection the Dialer can close from outside.
type trackedConn struct {
	net.Conn
	d *Dialer
}

func (c *trackedConn) Close() error {
	c.d.forget(c)
	return c.Conn.Close()
}

type stringAddr struct{ network, address string }

func (a stringAddr) Network() string { return a.network }
func (a stringAddr) String() string  { return a.address }
