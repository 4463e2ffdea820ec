package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/httpapi"
)

// thing is the body of the test API's POST /things.
type thing struct {
	Name   string `json:"name"`
	Amount int64  `json:"amount"`
	Inner  *struct {
		Tag string `json:"tag"`
	} `json:"inner"`
}

// api is a router from NewRouter with a small API of its own: GET
// /things/{id} echoes the decoded id, POST /things reads a strict JSON body
// and counts what it accepted.
type api struct {
	url      string
	reg      *prometheus.Registry
	accepted atomic.Int64
}

func newAPI(tb testing.TB, configure func(*http.Server)) *api {
	tb.Helper()
	a := &api{reg: prometheus.NewRegistry()}
	log := slog.New(slog.DiscardHandler)
	r := httpapi.NewRouter(log, httpapi.NewHTTPMetrics(a.reg), a.reg, nil)
	r.Get("/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := httpapi.PathParam(r, "id")
		if err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"id": id})
	})
	r.Post("/things", func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpapi.IdempotencyKey(r); err != nil && r.Header.Get("X-Want-Key") != "" {
			httpapi.WriteError(w, r, log, err)
			return
		}
		body, err := httpapi.ReadJSONBody(w, r)
		if err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		var t thing
		if err := httpapi.DecodeStrict(body, &t); err != nil {
			httpapi.WriteError(w, r, log, err)
			return
		}
		a.accepted.Add(1)
		httpapi.WriteJSON(w, http.StatusCreated, t)
	})
	srv := httptest.NewUnstartedServer(r)
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (a *api) do(tb testing.TB, method, path string, header http.Header, body string) response {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, a.url+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%.40s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// problem checks that r is a problem+json answer of kind and returns it.
func problem(tb testing.TB, r response, kind errkind.Kind) httpapi.Problem {
	tb.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %.200s)", ct, r.status, r.body)
	}
	var p httpapi.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		tb.Fatalf("problem body %.200q: %v", r.body, err)
	}
	if r.status != httpapi.Status(kind) || p.Status != httpapi.Status(kind) || p.Type != httpapi.TypeURI(kind) || p.Detail == "" {
		tb.Fatalf("got %d %+v, want %d %s with a detail", r.status, p, httpapi.Status(kind), httpapi.TypeURI(kind))
	}
	return p
}

func jsonHeader(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestMetricsLabelsBounded: method names a client makes up, and paths no
// route matches, add no series to /metrics.
func TestMetricsLabelsBounded(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	series := func() []string {
		t.Helper()
		r := a.do(t, http.MethodGet, "/metrics", nil, "")
		var out []string
		for line := range strings.SplitSeq(string(r.body), "\n") {
			if strings.HasPrefix(line, "http_requests_total{") {
				name, _, _ := strings.Cut(line, "} ")
				out = append(out, name+"}")
			}
		}
		return out
	}
	// One request of each kind first: each adds its series once.
	a.do(t, "BREW", "/things/1", nil, "")
	a.do(t, "BREW", "/nowhere/1", nil, "")
	a.do(t, http.MethodGet, "/nowhere/1", nil, "")
	series()
	before := series()
	for i := range 20 {
		a.do(t, fmt.Sprintf("M%d%s", i, strings.Repeat("X", 10<<10)), "/things/1", nil, "")
		a.do(t, fmt.Sprintf("Q%d", i), fmt.Sprintf("/nowhere/%d", i), nil, "")
		a.do(t, http.MethodGet, fmt.Sprintf("/nowhere/%d/%s", i, strings.Repeat("p", 1000)), nil, "")
	}
	after := series()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("series changed (-before +after):\n%s", diff)
	}
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true,
		"DELETE": true, "OPTIONS": true, "OTHER": true}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "http_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && !allowed[l.GetValue()] {
					t.Errorf("%s has method label %.40q", mf.GetName(), l.GetValue())
				}
				if l.GetName() == "route" && len(l.GetValue()) > 32 {
					t.Errorf("%s has route label %.40q", mf.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestMethodNotAllowed: every route answers another method with a 405
// problem and an Allow header naming its methods; GET routes serve HEAD.
func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodDelete, "/things/1", "GET, HEAD"},
		{http.MethodPost, "/things/1", "GET, HEAD"},
		{http.MethodGet, "/things", "POST"},
		{http.MethodPut, "/things", "POST"},
		{"BREW", "/things", "POST"},
		{http.MethodPost, "/healthz", "GET, HEAD"},
		{http.MethodDelete, "/metrics", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := a.do(t, tt.method, tt.path, nil, "")
			problem(t, r, errkind.MethodNotAllowed)
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
	t.Run("unknown method on unknown path", func(t *testing.T) {
		problem(t, a.do(t, "BREW", "/nowhere", nil, ""), errkind.NotFound)
	})
	t.Run("HEAD on a GET route", func(t *testing.T) {
		get := a.do(t, http.MethodGet, "/things/AB-1", nil, "")
		head := a.do(t, http.MethodHead, "/things/AB-1", nil, "")
		if head.status != http.StatusOK || len(head.body) != 0 || head.header.Get("Content-Type") != get.header.Get("Content-Type") {
			t.Errorf("HEAD = %d %q %q, want 200, the GET's Content-Type %q and no body",
				head.status, head.header.Get("Content-Type"), head.body, get.header.Get("Content-Type"))
		}
	})
}

// TestEncodedPathIDs: an id matches on its decoded value, decoded once.
func TestEncodedPathIDs(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tests := []struct{ path, want string }{
		{"/things/AB-1", "AB-1"},
		{"/things/%41B-1", "AB-1"},
		{"/things/%41%42%2D%31", "AB-1"},
		{"/things/a%2Fb", "a/b"},
		{"/things/a%2525b", "a%25b"},
		{"/things/a%25b", "a%b"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := a.do(t, http.MethodGet, tt.path, nil, "")
			var got map[string]string
			if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK {
				t.Fatalf("GET %s = %d %s", tt.path, r.status, r.body)
			}
			if got["id"] != tt.want {
				t.Errorf("id = %q, want %q", got["id"], tt.want)
			}
		})
	}
}

// TestBodyErrors: every way a body can be refused is a problem, and the
// handler accepted nothing.
func TestBodyErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	valid := `{"name":"x","amount":5}`
	manyUnknown := func(n int, name func(int) string) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range n {
			if i > 0 {
				b.WriteString(`,`)
			}
			fmt.Fprintf(&b, `%q:1`, name(i))
		}
		b.WriteString(`}`)
		return b.String()
	}
	tests := []struct {
		name        string
		header      http.Header
		body        string
		kind        errkind.Kind // zero for 201
		fields      []string
		maxResponse int // when > 0, the largest response body allowed
	}{
		{name: "valid", header: jsonHeader(), body: valid},
		{name: "charset utf-8", header: http.Header{"Content-Type": {"application/json; charset=utf-8"}}, body: valid},
		{name: "charset UTF-8 quoted", header: http.Header{"Content-Type": {`application/json;charset="UTF-8"`}}, body: valid},
		{name: "charset latin1", header: http.Header{"Content-Type": {"application/json; charset=iso-8859-1"}}, body: valid, kind: errkind.UnsupportedMedia},
		{name: "other parameter", header: http.Header{"Content-Type": {"application/json; version=2"}}, body: valid, kind: errkind.UnsupportedMedia},
		{name: "+json type", header: http.Header{"Content-Type": {"application/x+json"}}, body: valid, kind: errkind.UnsupportedMedia},
		{name: "problem+json", header: http.Header{"Content-Type": {"application/problem+json"}}, body: valid, kind: errkind.UnsupportedMedia},
		{name: "two Content-Types", header: http.Header{"Content-Type": {"application/json", "application/json"}}, body: valid, kind: errkind.UnsupportedMedia},
		{name: "no Content-Type", header: http.Header{}, body: valid, kind: errkind.UnsupportedMedia},
		{name: "duplicate key", header: jsonHeader(), body: `{"name":"x","amount":1,"amount":999999}`,
			kind: errkind.Malformed, fields: []string{"amount"}},
		{name: "duplicate nested key", header: jsonHeader(), body: `{"name":"x","amount":1,"inner":{"tag":"a","tag":"b"}}`,
			kind: errkind.Malformed, fields: []string{"inner.tag"}},
		{name: "duplicate key in an unknown array", header: jsonHeader(), body: `{"name":"x","list":[{"k":1},{"k":1,"k":2}]}`,
			kind: errkind.Malformed, fields: []string{"list[].k"}},
		{name: "duplicate null key", header: jsonHeader(), body: `{"name":"x","amount":1,"inner":null,"inner":null}`,
			kind: errkind.Malformed, fields: []string{"inner"}},
		{name: "fraction where an integer goes", header: jsonHeader(), body: `{"name":"x","amount":5.5}`,
			kind: errkind.Malformed, fields: []string{"amount"}},
		{name: "integral float past int64", header: jsonHeader(), body: `{"name":"x","amount":1e19}`,
			kind: errkind.Malformed, fields: []string{"amount"}},
		{name: "huge exponent", header: jsonHeader(), body: `{"name":"x","amount":1e999999999}`,
			kind: errkind.Malformed, fields: []string{"amount"}},
		{name: "same key in two objects is fine", header: jsonHeader(), body: `{"name":"tag","amount":1,"inner":{"tag":"name"}}`},
		{name: "unknown fields capped", header: jsonHeader(),
			body: manyUnknown(1000, func(i int) string { return fmt.Sprintf("f%03d", i) }),
			kind: errkind.Malformed, fields: []string{"f000", "f001", "f002", "f003", "f004", "f005", "f006", "f007", "f008", "f009"},
			maxResponse: 1500},
		{name: "long unknown name cut", header: jsonHeader(),
			body: manyUnknown(1, func(int) string { return strings.Repeat("é", 5000) }),
			kind: errkind.Malformed, fields: []string{strings.Repeat("é", 30) + "..."}, maxResponse: 1000},
		{name: "duplicates capped", header: jsonHeader(),
			body:   `{` + strings.Repeat(`"d":1,`, 500) + `"d":1}`,
			kind:   errkind.Malformed,
			fields: []string{"d", "d", "d", "d", "d", "d", "d", "d", "d", "d"}, maxResponse: 1000},
		{name: "one Idempotency-Key", header: jsonHeader("X-Want-Key", "1", "Idempotency-Key", "0b6f4a5e-3f0e-4c4e-9d1a-6a1f0f3f2a10"), body: valid},
		{name: "two Idempotency-Keys", header: jsonHeader("X-Want-Key", "1", "Idempotency-Key", "0b6f4a5e-3f0e-4c4e-9d1a-6a1f0f3f2a10",
			"Idempotency-Key", "0b6f4a5e-3f0e-4c4e-9d1a-6a1f0f3f2a10"), body: valid, kind: errkind.InvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := a.accepted.Load()
			r := a.do(t, http.MethodPost, "/things", tt.header, tt.body)
			if tt.maxResponse > 0 && len(r.body) > tt.maxResponse {
				t.Errorf("response is %d bytes, want at most %d", len(r.body), tt.maxResponse)
			}
			if tt.kind == (errkind.Kind{}) {
				if r.status != http.StatusCreated {
					t.Fatalf("status = %d, want 201; body %s", r.status, r.body)
				}
				return
			}
			p := problem(t, r, tt.kind)
			var got []string
			for _, f := range p.Errors {
				got = append(got, f.Field)
			}
			if diff := cmp.Diff(tt.fields, got); diff != "" {
				t.Errorf("field errors mismatch (-want +got):\n%s", diff)
			}
			if a.accepted.Load() != before {
				t.Error("a refused request was accepted")
			}
		})
	}
}

// TestIntegralNumbers: a number whose value is an integer is that integer
// however it is written, as JSON Schema's integer says; strings holding
// such numbers are left alone.
func TestIntegralNumbers(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	for body, want := range map[string]string{
		`{"name":"x","amount":6142664.0}`:         `{"name":"x","amount":6142664,"inner":null}`,
		`{"name":"x","amount":2.245e3}`:           `{"name":"x","amount":2245,"inner":null}`,
		`{"name":"x","amount":30000E-4}`:          `{"name":"x","amount":3,"inner":null}`,
		`{"name":"1.0","amount":-0.0}`:            `{"name":"1.0","amount":0,"inner":null}`,
		`{"amount":1.50e1,"name":"x","inner":{}}`: `{"name":"x","amount":15,"inner":{"tag":""}}`,
	} {
		r := a.do(t, http.MethodPost, "/things", jsonHeader(), body)
		if r.status != http.StatusCreated || strings.TrimSpace(string(r.body)) != want {
			t.Errorf("%s: %d %s, want 201 %s", body, r.status, r.body, want)
		}
	}
}

// TestIdempotencyKey: one rule for every service.
func TestIdempotencyKey(t *testing.T) {
	const key = "0b6f4a5e-3f0e-4c4e-9d1a-6a1f0f3f2a10"
	tests := []struct {
		name   string
		values []string
		ok     bool
	}{
		{"canonical", []string{key}, true},
		{"upper case", []string{strings.ToUpper(key)}, true},
		{"missing", nil, false},
		{"empty", []string{""}, false},
		{"two headers", []string{key, key}, false},
		{"braces", []string{"{" + key + "}"}, false},
		{"urn", []string{"urn:uuid:" + key}, false},
		{"32 hex digits", []string{strings.ReplaceAll(key, "-", "")}, false},
		{"nil UUID", []string{"00000000-0000-0000-0000-000000000000"}, false},
		{"spaces", []string{" " + key}, false},
		{"comma-joined", []string{key + "," + key}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/", nil)
			for _, v := range tt.values {
				r.Header.Add("Idempotency-Key", v)
			}
			id, err := httpapi.IdempotencyKey(r)
			if tt.ok {
				if err != nil || !strings.EqualFold(id.String(), key) {
					t.Fatalf("IdempotencyKey() = %v, %v; want %s", id, err, key)
				}
				return
			}
			var e *errkind.Error
			if !errors.As(err, &e) || e.Kind != errkind.InvalidKey {
				t.Fatalf("IdempotencyKey() error = %v, want errkind.InvalidKey", err)
			}
		})
	}
}

// TestRequestID: a client's X-Request-Id is kept only when it is one short
// token of safe characters; anything else is replaced, never echoed.
func TestRequestID(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tests := []struct {
		name   string
		values []string
		keep   bool
	}{
		{"token", []string{"req-1.A_b"}, true},
		{"64 characters", []string{strings.Repeat("a", 64)}, true},
		{"65 characters", []string{strings.Repeat("a", 65)}, false},
		{"space", []string{"a b"}, false},
		{"markup", []string{"<script>"}, false},
		{"quote", []string{`a"b`}, false},
		{"non-ASCII", []string{"ação"}, false},
		{"two headers", []string{"a", "b"}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.values {
				h.Add("X-Request-Id", v)
			}
			r := a.do(t, http.MethodGet, "/nowhere", h, "")
			p := problem(t, r, errkind.NotFound)
			got := r.header.Get("X-Request-Id")
			if p.RequestID != got {
				t.Errorf("problem requestId %q, header %q: want the same", p.RequestID, got)
			}
			if tt.keep {
				if got != tt.values[0] {
					t.Errorf("X-Request-Id = %q, want %q kept", got, tt.values[0])
				}
				return
			}
			if len(got) != 16 || strings.Trim(got, "0123456789abcdef") != "" {
				t.Errorf("X-Request-Id = %q, want a new 16-hex-digit id", got)
			}
		})
	}
}

// TestStalledBody: a client that stops sending its body gets a 408
// problem once the server's read deadline passes, not a 400.
func TestStalledBody(t *testing.T) {
	t.Parallel()
	a := newAPI(t, func(s *http.Server) { s.ReadTimeout = 300 * time.Millisecond })
	var d net.Dialer
	conn, err := d.DialContext(context.Background(), "tcp", strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = io.WriteString(conn, "POST /things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":")
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	problem(t, response{status: res.StatusCode, header: res.Header, body: body}, errkind.Timeout)
	if a.accepted.Load() != 0 {
		t.Error("a stalled request was accepted")
	}
}
