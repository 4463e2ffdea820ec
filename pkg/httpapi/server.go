package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/felixge/httpsnoop"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/paysuite/payments/pkg/errkind"
	"github.com/paysuite/payments/pkg/tracing"
)

// Server timeouts: a slow or stalled client cannot hold a connection.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
	ShutdownTimeout   = 20 * time.Second
)

// Serve listens on addr and serves h until ctx is cancelled, then stops
// accepting requests and waits up to ShutdownTimeout for those in flight.
// ready, if not nil, receives the bound address once listening (tests use
// ":0").
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger, ready func(net.Addr)) error {
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}

// DefaultRequestTimeout is the services' default request deadline
// (Deadline), under a client's own timeout.
const DefaultRequestTimeout = 3 * time.Second

// Deadline bounds each request's context to d: a dependency that does not
// answer in time fails the handler's call with context.DeadlineExceeded,
// which WriteError answers 503 service-unavailable with Retry-After. A
// commit cut off this way may be written: PostgreSQL commits locally
// before it waits for a synchronous standby, and pgx, closing the cut-off
// connection, first sends a cancel request (pgconn's asyncClose), which
// ends that wait with the row committed, and visible, on the primary
// alone. The client's retry with the same Idempotency-Key answers the
// first response. d <= 0 leaves requests unbounded (tests of other
// middleware).
func Deadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// Detached returns a context for work a request starts that must not be
// cut off halfway by the request deadline (a dead-letter replay: cut, the
// operator would not know what was replayed): the request's values, a
// bound of d of its own, and no cancellation from the request.
func Detached(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), d)
}

type ctxKey int

const requestIDKey ctxKey = 1

// RequestIDFrom returns the request id of ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// HTTPMetrics are the access metrics of a service.
type HTTPMetrics struct {
	Requests *prometheus.CounterVec
	Duration *prometheus.HistogramVec
}

// NewHTTPMetrics creates and registers the access metrics (reg nil: not
// registered).
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	f := promauto.With(reg)
	return &HTTPMetrics{
		Requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total", Help: "HTTP requests by method, route and status."},
			[]string{"method", "route", "status"}),
		Duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_request_duration_seconds", Help: "HTTP request latency by method and route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"method", "route"}),
	}
}

// NotReady is a failed readiness check. /readyz answers 503 naming Check
// ("database", "migrations", "kafka", ...), never Err, which the caller
// logs; any other error from the ready function gives a bare "not ready".
type NotReady struct {
	Check string
	Err   error
}

func (e *NotReady) Error() string { return e.Check + ": " + e.Err.Error() }
func (e *NotReady) Unwrap() error { return e.Err }

// NewRouter returns a chi router with the suite's middleware (request id,
// panic recovery as a 500 problem, access log and metrics), problem+json
// answers for unknown routes and methods, and the operational routes:
// /healthz (alive), /readyz (ready() == nil) and /metrics (gatherer).
// ready is called on every /readyz: it must be cheap (a kept result, not
// a check of the dependencies).
// mw run after those, before routing: the authentication middleware
// (pkg/auth) in every service.
//
// A 405 names the allowed methods in Allow; every GET route also serves
// HEAD. Routes match on the escaped path and PathParam decodes a parameter
// once, so an id spelled with percent-escapes ("/contas/%43C-001") is the
// same id.
func NewRouter(log *slog.Logger, metrics *HTTPMetrics, gatherer prometheus.Gatherer, ready func(context.Context) error, mw ...func(http.Handler) http.Handler) chi.Router {
	r := chi.NewRouter()
	r.Use(requestID, traced(), recoverer(log), access(log, metrics))
	r.Use(routeOnEscapedPath, middleware.GetHead)
	r.Use(mw...)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, log, errkind.Errorf(errkind.NotFound, "no route for this path"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		allowed := allowedMethods(r, req)
		if len(allowed) == 0 {
			// An unknown method on an unknown path: chi asks for a 405
			// before it looks at the path.
			WriteError(w, req, log, errkind.Errorf(errkind.NotFound, "no route for this path"))
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		WriteError(w, req, log, errkind.Errorf(errkind.MethodNotAllowed, "this route answers %s only", strings.Join(allowed, ", ")))
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			if err := ready(r.Context()); err != nil {
				// The cause (a driver error: host, user, database) is
				// never shown: the body names the check only. ready
				// answers from a probe's result, which the probe logs:
				// a flood of /readyz is not a flood of log lines.
				detail := "not ready"
				var nr *NotReady
				if errors.As(err, &nr) {
					detail = "not ready: " + nr.Check
				}
				WriteError(w, r, log, errkind.Errorf(errkind.Unavailable, "%s", detail))
				return
			}
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	if gatherer != nil {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return r
}

// methods are the request methods the suite knows; any other is "OTHER"
// in metrics, spans and logs, so that a client cannot mint label values.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// methodLabel returns m when it is one of methods, else "OTHER".
func methodLabel(m string) string {
	if slices.Contains(methods, m) {
		return m
	}
	return "OTHER"
}

// allowedMethods lists the methods mux routes for req's path (HEAD
// wherever GET is, as middleware.GetHead serves it).
func allowedMethods(mux chi.Routes, req *http.Request) []string {
	path := req.URL.EscapedPath()
	if rctx := chi.RouteContext(req.Context()); rctx != nil && rctx.RoutePath != "" {
		path = rctx.RoutePath
	}
	var out []string
	for _, m := range methods {
		if mux.Match(chi.NewRouteContext(), m, path) ||
			(m == http.MethodHead && mux.Match(chi.NewRouteContext(), http.MethodGet, path)) {
			out = append(out, m)
		}
	}
	return out
}

// routeOnEscapedPath makes chi match every request on its escaped path.
// chi matches on RawPath when the client's escaping differs from Go's and
// on the decoded Path otherwise, so a parameter would come decoded or not
// depending on the spelling; on the escaped path it is always escaped, and
// PathParam decodes it exactly once.
func routeOnEscapedPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath == "" {
			rctx.RoutePath = r.URL.EscapedPath()
		}
		next.ServeHTTP(w, r)
	})
}

// requestIDPattern is what a client's X-Request-Id may be: a short token
// of characters that are safe in a header, a log line and a JSON string.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID keeps the client's X-Request-Id when it is one safe token and
// makes a new one otherwise: nothing else a client sends is echoed into
// responses or logs.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id string
		if vs := r.Header.Values("X-Request-Id"); len(vs) == 1 && requestIDPattern.MatchString(vs[0]) {
			id = vs[0]
		} else {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// traced continues the caller's trace (W3C traceparent) with a server span
// per request (otelhttp), named by spanName.
func traced() func(http.Handler) http.Handler {
	return otelhttp.NewMiddleware("http.server",
		otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return spanName(r) }))
}

// spanName names a request's server span: the method and chi's route
// pattern once routed, the method alone before that or when no route
// matched; never the path, and an unknown method is "OTHER", so that a
// client cannot mint span names. otelhttp names the span when it starts,
// before routing, and renames it afterwards only when the request it
// passed on got a Pattern (no middleware copied it), so access renames it
// too.
func spanName(r *http.Request) string {
	if route := routeLabel(r); route != unmatched {
		return methodLabel(r.Method) + " " + route
	}
	return methodLabel(r.Method)
}

func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
						panic(v)
					}
					// The logger adds request_id from the context (platform's handler).
					log.ErrorContext(r.Context(), "panic in handler", "panic", fmt.Sprint(v), "path", r.URL.Path)
					WriteError(w, r, log, errkind.Errorf(errkind.Internal, "internal error"))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

func access(log *slog.Logger, m *HTTPMetrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// CaptureMetrics: the status is 200 when the handler wrote
			// nothing or a body without a status.
			cm := httpsnoop.CaptureMetrics(next, w, r)
			route := routeLabel(r)
			method := methodLabel(r.Method)
			if route != unmatched {
				span := trace.SpanFromContext(r.Context())
				span.SetName(spanName(r))
				span.SetAttributes(attribute.String("http.route", route))
			}
			d := cm.Duration
			if m != nil {
				m.Requests.WithLabelValues(method, route, strconv.Itoa(cm.Code)).Inc()
				m.Duration.WithLabelValues(method, route).Observe(d.Seconds())
			}
			if route != "/metrics" && route != "/healthz" && route != "/readyz" {
				// request_id and trace_id come from the context, added by the
				// logger's handler (pkg/platform), once.
				log.DebugContext(r.Context(), "http request", "method", method, "route", route,
					"status", cm.Code, "duration_ms", d.Milliseconds())
			}
		})
	}
}

// unmatched is the route label of a request no route matched.
const unmatched = "unmatched"

// routeLabel is the matched route pattern, one of the router's own, or
// unmatched: never the request's path.
func routeLabel(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || rc.RoutePattern() == "" || len(rc.RoutePatterns) == 0 {
		return unmatched
	}
	return rc.RoutePattern()
}
