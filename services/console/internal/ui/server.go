// Package ui is the operator console's web interface: server-rendered
// pages (html/template, assets embedded), sessions holding the operator's
// token on the server, one-time CSRF tokens on every form, and the calls
// to the services' /ops endpoints with the operator's token.
package ui

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/paysuite/payments/pkg/auth"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is sent with every page: nothing but the
// console's own stylesheet and images, no script at all, forms only to
// the console, never framed.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config configures the interface.
type Config struct {
	// Transfers, Ledger, Antifraud and Notifications are the services.
	Transfers, Ledger, Antifraud, Notifications Upstream
	// SessionTTL bounds a session's life.
	SessionTTL time.Duration
	// MaxSessions caps the signed-in sessions kept (DefaultMaxSessions
	// when <= 0); past it, a sign-in ends the oldest session.
	MaxSessions int
	// ActionsPerMinute limits the actions of one session.
	ActionsPerMinute int
	// SampleInterval is how often the services' /metrics are read for the
	// Backlogs charts (default 10 s; 15 minutes are kept).
	SampleInterval time.Duration
	// OIDC, when its Issuer is set, adds sign-in by OpenID Connect.
	OIDC OIDC
}

// Verifier checks a pasted bearer token (pkg/auth's *Verifier).
type Verifier interface {
	Verify(ctx context.Context, raw string) (auth.Principal, error)
}

// Server is the console's HTTP interface.
type Server struct {
	cfg      Config
	log      *slog.Logger
	verifier Verifier
	sessions *sessions
	client   *client
	pages    map[string]*template.Template
	now      func() time.Time
	sampler  *sampler
	oidc     *oidcFlow // nil: pasted tokens only
}

// New returns the console's interface.
func New(cfg Config, verifier Verifier, log *slog.Logger) (*Server, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.ActionsPerMinute <= 0 {
		cfg.ActionsPerMinute = 10
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 10 * time.Second
	}
	s := &Server{cfg: cfg, log: log, verifier: verifier, sessions: newSessions(cfg.SessionTTL, cfg.MaxSessions),
		client: newClient(), pages: map[string]*template.Template{}, now: time.Now}
	s.sampler = newSampler(cfg.SampleInterval, s.upstreams())
	if cfg.OIDC.Issuer != "" {
		s.oidc = newOIDCFlow(cfg.OIDC)
	}
	funcs := template.FuncMap{"clock": clock, "money": money}
	for _, page := range []string{"signin", "signedin", "find", "journey", "account", "backlogs", "deposits", "confirm", "replay", "message", "held", "heldconfirm"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+page+".html")
		if err != nil {
			return nil, err
		}
		s.pages[page] = t
	}
	return s, nil
}

// Sample reads the services' /metrics for the Backlogs charts until ctx
// ends.
func (s *Server) Sample(ctx context.Context) { s.sampler.run(ctx) }

// Sweep drops expired sessions every minute until ctx ends: requests never
// walk the store.
func (s *Server) Sweep(ctx context.Context) { s.sessions.sweepLoop(ctx, sweepEvery) }

// Mount adds the console's routes to r.
func (s *Server) Mount(r chi.Router) {
	static, _ := fs.Sub(assets, "assets/static")
	r.Group(func(r chi.Router) {
		r.Use(s.secure)
		r.Handle("/static/*", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
		r.Get("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/find", http.StatusSeeOther) })
		r.Get("/signin", s.signinPage)
		r.Post("/signin", s.signin)
		r.Post("/signout", s.signedIn(s.signout))
		if s.oidc != nil {
			r.Get("/oidc/login", s.oidcLogin)
			r.Get("/oidc/callback", s.oidcCallback)
		}
		r.Get("/find", s.signedIn(s.find))
		r.Get("/transfers/{id}", s.signedIn(s.journey))
		r.Get("/accounts/{id}", s.signedIn(s.account))
		r.Get("/backlogs", s.signedIn(s.backlogs))
		r.Get("/deposits", s.signedIn(s.deposits))
		r.Get("/actions/requeue", s.signedIn(s.confirmRequeue))
		r.Post("/actions/requeue", s.signedIn(s.action("console.requeue", s.requeue)))
		r.Get("/actions/replay", s.signedIn(s.confirmReplay))
		r.Post("/actions/replay", s.signedIn(s.action("console.replay", s.replay)))
		r.Get("/held", s.signedIn(s.held))
		r.Get("/actions/held", s.signedIn(s.confirmHeld))
		r.Post("/actions/held-apply", s.signedIn(s.action("console.held_apply", s.resolveHeld(true))))
		r.Post("/actions/held-discard", s.signedIn(s.action("console.held_discard", s.resolveHeld(false))))
	})
}

// secure sets the security headers of every console answer.
func (s *Server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, sess *session)

// signedIn sends a request without a signed-in session to the sign-in
// page (a POST changes nothing: it is answered 401).
func (s *Server) signedIn(next sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := s.sessions.get(r)
		if sess == nil || !sess.signedIn() {
			if r.Method != http.MethodGet {
				s.message(w, r, nil, http.StatusUnauthorized, "Not signed in", "Sign in first: nothing was changed.")
				return
			}
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		next(w, r, sess)
	}
}

// view is what every page template gets.
type view struct {
	Title    string
	Operator string
	// Refresh sends the browser on to the find page (after an OpenID
	// Connect sign-in; see oidcCallback).
	Refresh bool
	// CSRF is a fresh one-time token for each form of the page.
	csrf func() string
	Down []string
	Data any
}

// CSRF returns a new one-time token; each form of a page calls it once.
func (v view) CSRF() string { return v.csrf() }

func (s *Server) render(w http.ResponseWriter, r *http.Request, sess *session, status int, page, title string, down []string, data any) {
	// A signed-in session's forms get one-time tokens kept with it; a
	// browser not signed in gets the token of its signed pre-sign-in
	// cookie, and nothing is kept for it.
	csrf := func() string {
		if sess.signedIn() {
			return s.sessions.formToken(sess)
		}
		return s.sessions.preSigninToken(w, r)
	}
	v := view{Title: title, Down: down, Data: data, csrf: csrf, Refresh: page == "signedin"}
	if sess.signedIn() {
		v.Operator = sess.principal.Subject
	}
	var b strings.Builder
	if err := s.pages[page].Execute(&b, v); err != nil {
		s.log.ErrorContext(r.Context(), "render page", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// Message is the data of the message page.
type Message struct {
	Heading, Text string
	// Back is where the page's link leads; empty: the find page.
	Back string
}

func (s *Server) message(w http.ResponseWriter, r *http.Request, sess *session, status int, heading, text string) {
	s.render(w, r, sess, status, "message", heading, nil, Message{Heading: heading, Text: text})
}

// upstreamFailed answers an upstream error that leaves nothing to show.
func (s *Server) upstreamFailed(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	var down *downError
	var prob *problemError
	switch {
	case errors.Is(err, errSignedOut):
		s.sessions.destroy(w, sess)
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
	case errors.As(err, &down):
		s.message(w, r, sess, http.StatusBadGateway, "Service unavailable", down.Error())
	case errors.As(err, &prob):
		s.message(w, r, sess, http.StatusBadRequest, "Refused", prob.Error())
	default:
		s.log.ErrorContext(r.Context(), "console upstream call", "err", err)
		s.message(w, r, sess, http.StatusInternalServerError, "Internal error", "internal error")
	}
}

func (s *Server) signinPage(w http.ResponseWriter, r *http.Request) {
	if s.sessions.get(r).signedIn() {
		http.Redirect(w, r, "/find", http.StatusSeeOther)
		return
	}
	s.render(w, r, nil, http.StatusOK, "signin", "Sign in", nil, s.signinForm(""))
}

// SigninForm is the sign-in page's data.
type SigninForm struct {
	// Error says why the last sign-in was refused.
	Error string
	// Provider names the OpenID provider; empty when there is none.
	Provider string
}

func (s *Server) signinForm(err string) SigninForm {
	f := SigninForm{Error: err}
	if s.oidc != nil {
		f.Provider = s.oidc.cfg.Name
	}
	return f
}

// errCSRF is a form without a valid CSRF token.
var errCSRF = errors.New("the form's CSRF token is missing, spent or expired")

func (s *Server) signin(w http.ResponseWriter, r *http.Request) {
	sess := s.sessions.get(r)
	if !sess.signedIn() {
		sess = nil
	}
	err := r.ParseForm()
	if sess != nil && err == nil {
		err = errCSRF
		if s.sessions.spend(sess, r.PostFormValue("csrf")) {
			err = nil
		}
	} else if err == nil && !s.sessions.spendPreSignin(r, r.PostFormValue("csrf")) {
		err = errCSRF
	}
	if err != nil {
		s.render(w, r, nil, http.StatusForbidden, "signin", "Sign in", nil,
			s.signinForm("The form expired or was already used: sign in again from this page."))
		return
	}
	raw := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.PostFormValue("token")), "Bearer "))
	p, err := s.verifier.Verify(r.Context(), raw)
	if err != nil {
		s.render(w, r, sess, http.StatusUnauthorized, "signin", "Sign in", nil, s.signinForm("The token was refused: "+err.Error()))
		return
	}
	if !p.Operator() {
		s.render(w, r, sess, http.StatusForbidden, "signin", "Sign in", nil, s.signinForm("The token does not grant the operacoes scope."))
		return
	}
	// A new session id at sign-in: an id planted before cannot be used.
	s.sessions.destroy(w, sess)
	s.sessions.create(w, raw, p)
	clearPreSignin(w)
	s.log.InfoContext(r.Context(), "audit", slog.Group("audit", "action", "console.signin", "client", p.Subject))
	http.Redirect(w, r, "/find", http.StatusSeeOther)
}

func (s *Server) signout(w http.ResponseWriter, r *http.Request, sess *session) {
	if err := r.ParseForm(); err != nil || !s.sessions.spend(sess, r.PostFormValue("csrf")) {
		s.message(w, r, sess, http.StatusForbidden, "Refused", "The form expired or was already used: nothing was changed.")
		return
	}
	s.sessions.destroy(w, sess)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}
