package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// The generator's POST carries a transfer the service decodes, between two
// distinct accounts, with the token and the Idempotency-Key; a 503 is shed
// only when its problem type says overloaded.
func TestPostSendsATransferAndReadsTheShed(t *testing.T) {
	t.Parallel()
	accounts := []string{"bench-0000", "bench-0001", "bench-0002"}
	// Set between requests; atomic, since a socket is no edge the race
	// detector sees.
	var answer atomic.Int64
	var problem atomic.Pointer[string]
	answer.Store(http.StatusAccepted)
	problem.Store(new(overloadedType))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var in struct {
			Origem  string `json:"contaOrigem"`
			Destino string `json:"contaDestino"`
			Valor   int64  `json:"valorEmCentavos"`
			Moeda   string `json:"moeda"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || in.Origem == in.Destino || in.Valor < 1 || in.Valor > 100 || in.Moeda != "BRL" {
			t.Errorf("body %s: %+v, %v", b, in, err)
		}
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("headers %v", r.Header)
		}
		if _, err := uuid.Parse(r.Header.Get("Idempotency-Key")); err != nil {
			t.Errorf("Idempotency-Key %q: %v", r.Header.Get("Idempotency-Key"), err)
		}
		w.WriteHeader(int(answer.Load()))
		if answer.Load() == http.StatusServiceUnavailable {
			_, _ = w.Write([]byte(`{"type":"` + *problem.Load() + `","status":503}`))
		}
	}))
	defer srv.Close()
	a := newAPI("tok", "", 4)
	for range 50 {
		if st, shed := a.post(context.Background(), srv.URL, uuid.New(), accounts); st != http.StatusAccepted || shed {
			t.Fatalf("accepted: got %d, shed %v", st, shed)
		}
	}
	answer.Store(http.StatusServiceUnavailable)
	if st, shed := a.post(context.Background(), srv.URL, uuid.New(), accounts); st != http.StatusServiceUnavailable || !shed {
		t.Fatalf("overloaded: got %d, shed %v", st, shed)
	}
	other := "https://example.test/problems/unavailable"
	problem.Store(&other)
	if st, shed := a.post(context.Background(), srv.URL, uuid.New(), accounts); st != http.StatusServiceUnavailable || shed {
		t.Fatalf("another 503: got %d, shed %v", st, shed)
	}
}

// The generator holds at most its maxConns connections to a service: with
// the first requests held by the service, the rest wait for one of their
// connections rather than open more.
func TestPostHoldsAtMostMaxConnsConnections(t *testing.T) {
	t.Parallel()
	const maxConns, requests = 4, 20
	var conns atomic.Int64
	arrived, release := make(chan struct{}, requests), make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	a := newAPI("tok", "", maxConns)
	accounts := []string{"bench-0000", "bench-0001"}
	done := make(chan int, requests)
	for range requests {
		go func() {
			st, _ := a.post(context.Background(), srv.URL, uuid.New(), accounts)
			done <- st
		}()
	}
	for range maxConns {
		<-arrived
	}
	close(release)
	for range requests {
		if st := <-done; st != http.StatusAccepted {
			t.Fatalf("a request answered %d", st)
		}
	}
	if n := conns.Load(); n > maxConns {
		t.Errorf("%d requests at once opened %d connections, want at most %d", requests, n, maxConns)
	}
}
