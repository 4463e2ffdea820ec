// Package netfault is a TCP proxy for fault-injection tests: clients dial
// the proxy instead of a dependency (PostgreSQL, a broker), and the test
// cuts it (the dependency "goes away": new connections refused, open ones
// closed) and restores it on the same address, or hangs it (the
// dependency stops answering, as a SIGSTOPped server does, with every
// connection left open) and resumes it.
package netfault

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysuite/payments/test/support/poll"
)

// Proxy forwards TCP connections from its own address to a target, and
// can be cut (listener and every open connection closed, as when the
// database host goes away) and restored on the same address.
type Proxy struct {
	tb     testing.TB
	target string
	addr   string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	// flowing is closed while bytes flow; Hang replaces it with an open
	// channel, which Resume, Cut and the test's end close.
	flowing chan struct{}
}

// NewProxy listens on a free loopback port and forwards to target until
// the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p := &Proxy{tb: tb, target: target, conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(p.flowing)
	if err := p.listen("127.0.0.1:0"); err != nil {
		tb.Fatalf("proxy: listen: %v", err)
	}
	p.addr = p.ln.Addr().String()
	tb.Cleanup(p.close)
	return p
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) listen(addr string) error {
	lc := net.ListenConfig{}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Cut or close
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 5 * time.Second}
	server, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.waitFlowing()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done // either side ended: end both
	p.untrack(client, server)
	<-done
}

// track registers a connection pair, or closes it if the proxy was cut
// meanwhile.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil || p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Hang stops forwarding bytes in either direction while leaving every
// connection open and accepting new ones: the dependency hangs, as a
// stopped process whose kernel still holds its connections. Resume ends it.
func (p *Proxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default: // already hung
	}
}

// Resume forwards again what Hang held back.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
}

func (p *Proxy) resumeLocked() {
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// waitFlowing blocks while the proxy hangs.
func (p *Proxy) waitFlowing() {
	p.mu.Lock()
	ch := p.flowing
	p.mu.Unlock()
	<-ch
}

// Cut closes the listener, so new connections are refused, and every open
// connection, so requests in flight fail. A hang ends with it.
func (p *Proxy) Cut() {
	p.tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Restore listens again on the same address.
func (p *Proxy) Restore() {
	p.tb.Helper()
	// The port may linger for a moment after close.
	poll.Until(p.tb, 5*time.Second, "the proxy listening again on "+p.addr, func() (bool, string) {
		if err := p.listen(p.addr); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Cut()
	waited := make(chan struct{})
	go func() { p.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		p.tb.Error(errors.New("proxy: connections still open 10s after close"))
	}
}

// PostgresURL returns dsn (a postgres:// URL) with its host and port
// replaced by the proxy's address, and the proxy, which forwards to dsn's
// server until the test ends.
func PostgresURL(tb testing.TB, dsn string) (string, *Proxy) {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("netfault: %q is not a postgres:// URL: %v", dsn, err)
	}
	target := u.Host
	if !strings.Contains(target, ":") {
		target += ":5432"
	}
	p := NewProxy(tb, target)
	u.Host = p.Addr()
	return u.String(), p
}
