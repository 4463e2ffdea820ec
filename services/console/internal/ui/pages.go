package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/httpapi"
	"github.com/paysuite/payments/pkg/opsapi"
)

// accountID is the shape of an account id (CONTRACTS.md section 2).
var accountID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// FindPage is the find page's data.
type FindPage struct {
	Query, Error string
}

func (s *Server) find(w http.ResponseWriter, r *http.Request, sess *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	switch {
	case q == "":
		s.render(w, r, sess, http.StatusOK, "find", "Find", nil, FindPage{})
	case len(q) == 36:
		if id, ok := httpapi.ParseUUID(q); ok {
			http.Redirect(w, r, "/transfers/"+id.String(), http.StatusSeeOther) //nolint:gosec // a local path with a canonical UUID
			return
		}
		fallthrough
	default:
		if accountID.MatchString(q) && len(q) != 36 {
			http.Redirect(w, r, "/accounts/"+url.PathEscape(q), http.StatusSeeOther)
			return
		}
		s.render(w, r, sess, http.StatusBadRequest, "find", "Find", nil, FindPage{Query: q,
			Error: fmt.Sprintf("%q is neither a transfer id or idempotency key (a UUID such as 0b6f4a5e-3f0e-4c4e-9d1a-6a1f0f3f2a10) nor an account id (1 to 32 of A-Z a-z 0-9 . _ -).", q)})
	}
}

// fetcher runs the upstream calls of one page in parallel and collects
// which services are down.
type fetcher struct {
	s     *Server
	ctx   context.Context
	token string
	wg    sync.WaitGroup
	mu    sync.Mutex
	down  map[string]string
	// signedOut: a service refused the token.
	signedOut bool
	other     []error
}

func (s *Server) fetcher(ctx context.Context, sess *session) *fetcher {
	return &fetcher{s: s, ctx: ctx, token: sess.token, down: map[string]string{}}
}

// get fetches path of u into out in the background; found reports
// whether it answered 200 (false for 404 or any failure).
func (f *fetcher) get(u Upstream, path string, out any, found *bool) {
	f.start(u, path, out, func() { *found = true })
}

// fetchInto is get for a part of a page that may be missing: once f.wait
// returned, *dst points at u's answer when it had one, and stays nil
// otherwise.
func fetchInto[T any](f *fetcher, u Upstream, path string, dst **T) {
	v := new(T)
	f.start(u, path, v, func() { *dst = v })
}

// start fetches path of u into out in the background and calls found,
// under f.mu, when it answered 200.
func (f *fetcher) start(u Upstream, path string, out any, found func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.s.client.do(f.ctx, u, f.token, http.MethodGet, path, out)
		f.mu.Lock()
		defer f.mu.Unlock()
		var down *downError
		switch {
		case err == nil:
			found()
		case errors.Is(err, errNotFound):
		case errors.Is(err, errSignedOut):
			f.signedOut = true
		case errors.As(err, &down):
			f.down[u.Name] = down.Cause
		default:
			f.other = append(f.other, err)
		}
	}()
}

// wait waits for every call and returns the down services' lines, sorted
// by name.
func (f *fetcher) wait() []string {
	f.wg.Wait()
	var out []string
	for _, name := range []string{"transfers", "antifraud", "ledger", "notifications"} {
		if cause, ok := f.down[name]; ok {
			out = append(out, name+" is unavailable ("+cause+")")
		}
	}
	return out
}

// failure is what keeps the page from being shown once f.wait returned: a
// token a service refused, or an answer that was neither found, missing
// nor an outage; nil when the page can be shown (naming the services
// down).
func (f *fetcher) failure() error {
	if f.signedOut {
		return errSignedOut
	}
	if len(f.other) > 0 {
		return f.other[0]
	}
	return nil
}

func (s *Server) journey(w http.ResponseWriter, r *http.Request, sess *session) {
	raw, _ := httpapi.PathParam(r, "id")
	id, ok := httpapi.ParseUUID(raw)
	if !ok {
		s.render(w, r, sess, http.StatusBadRequest, "find", "Find", nil, FindPage{Query: raw,
			Error: fmt.Sprintf("%q is not a transfer id: a transfer id is a UUID.", raw)})
		return
	}
	f := s.fetcher(r.Context(), sess)
	var p journeyParts
	sid := id.String()
	fetchInto(f, s.cfg.Transfers, "/ops/transferencias/"+sid, &p.transfer)
	fetchInto(f, s.cfg.Transfers, "/ops/transferencias/"+sid+"/estornos", &p.refunds)
	fetchInto(f, s.cfg.Transfers, "/ops/outbox/transferencias/"+sid, &p.transfersOut)
	fetchInto(f, s.cfg.Transfers, "/ops/outbox", &p.transfersLog)
	fetchInto(f, s.cfg.Antifraud, "/ops/decisoes/"+sid, &p.decision)
	fetchInto(f, s.cfg.Antifraud, "/ops/outbox/transferencias/"+sid, &p.antifraudOut)
	fetchInto(f, s.cfg.Antifraud, "/ops/outbox", &p.antifraudLog)
	fetchInto(f, s.cfg.Ledger, "/ops/liquidacoes/"+sid, &p.settlement)
	fetchInto(f, s.cfg.Ledger, "/ops/outbox/transferencias/"+sid, &p.ledgerOut)
	fetchInto(f, s.cfg.Ledger, "/ops/outbox", &p.ledgerBacklog)
	fetchInto(f, s.cfg.Notifications, "/ops/notificacoes/"+sid, &p.notifications)
	down := f.wait()
	if err := f.failure(); err != nil {
		s.upstreamFailed(w, r, sess, err)
		return
	}
	p.down = map[string]bool{}
	for name := range f.down {
		p.down[name] = true
	}
	if p.transfer == nil && !p.down["transfers"] {
		s.render(w, r, sess, http.StatusNotFound, "find", "Find", down, FindPage{Query: sid,
			Error: "No transfer has the id " + sid + "."})
		return
	}
	j := buildJourney(sid, p, s.now())
	s.render(w, r, sess, http.StatusOK, "journey", "Transfer "+sid, down, j)
}

// AccountPage is the account page's data.
type AccountPage struct {
	ID                          string
	Account                     *account
	Postings                    *postingsPage
	Transfers                   *opsTransferPage
	NextPostings, NextTransfers string
}

func (s *Server) account(w http.ResponseWriter, r *http.Request, sess *session) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil || !accountID.MatchString(id) {
		s.render(w, r, sess, http.StatusBadRequest, "find", "Find", nil, FindPage{Query: id,
			Error: fmt.Sprintf("%q is not an account id (1 to 32 of A-Z a-z 0-9 . _ -).", id)})
		return
	}
	q := r.URL.Query()
	f := s.fetcher(r.Context(), sess)
	page := AccountPage{ID: id}
	esc := url.PathEscape(id)
	pq := url.Values{"limite": {"10"}}
	if c := q.Get("lancamentos"); c != "" {
		pq.Set("cursor", c)
	}
	tq := url.Values{"limite": {"10"}}
	if c := q.Get("transferencias"); c != "" {
		tq.Set("apos", c)
	}
	fetchInto(f, s.cfg.Ledger, "/contas/"+esc, &page.Account)
	fetchInto(f, s.cfg.Ledger, "/contas/"+esc+"/lancamentos?"+pq.Encode(), &page.Postings)
	fetchInto(f, s.cfg.Transfers, "/ops/contas/"+esc+"/transferencias?"+tq.Encode(), &page.Transfers)
	down := f.wait()
	if err := f.failure(); err != nil {
		s.upstreamFailed(w, r, sess, err)
		return
	}
	if page.Account == nil && f.down["ledger"] == "" {
		s.render(w, r, sess, http.StatusNotFound, "find", "Find", down, FindPage{Query: id, Error: "No account has the id " + id + "."})
		return
	}
	// Each list's next page keeps the other list where it is.
	next := func(param, cursor, other string) string {
		v := url.Values{param: {cursor}}
		if c := q.Get(other); c != "" {
			v.Set(other, c)
		}
		return "/accounts/" + esc + "?" + v.Encode()
	}
	if page.Postings != nil && page.Postings.ProximoCursor != nil {
		page.NextPostings = next("lancamentos", *page.Postings.ProximoCursor, "transferencias")
	}
	if page.Transfers != nil && page.Transfers.Proxima != "" {
		page.NextTransfers = next("transferencias", page.Transfers.Proxima, "lancamentos")
	}
	s.render(w, r, sess, http.StatusOK, "account", "Account "+id, down, page)
}

// ServiceBacklog is one service's outbox backlog on the backlogs page.
type ServiceBacklog struct {
	Service string
	Backlog *opsapi.Backlog
	// DLTs are the service's dead-letter topics (ledger, notifications).
	DLTs *opsapi.DLTs
	// Metrics are the consumer lags and charts from its /metrics; nil
	// before the first sample.
	Metrics *Metrics
	// Oldest is the age of the oldest pending event, in words.
	Oldest string
}

func (s *Server) upstreams() []Upstream {
	return []Upstream{s.cfg.Transfers, s.cfg.Antifraud, s.cfg.Ledger, s.cfg.Notifications}
}

func (s *Server) upstream(name string) (Upstream, bool) {
	for _, u := range s.upstreams() {
		if u.Name == name {
			return u, true
		}
	}
	return Upstream{}, false
}

func (s *Server) backlogs(w http.ResponseWriter, r *http.Request, sess *session) {
	f := s.fetcher(r.Context(), sess)
	ups := s.upstreams()
	out := make([]ServiceBacklog, len(ups))
	for i, u := range ups {
		out[i].Service = u.Name
		fetchInto(f, u, "/ops/outbox", &out[i].Backlog)
		if writesDLTs(u.Name) {
			fetchInto(f, u, "/ops/dlt", &out[i].DLTs)
		}
	}
	down := f.wait()
	if f.signedOut {
		s.upstreamFailed(w, r, sess, errSignedOut)
		return
	}
	for i, u := range ups {
		if b := out[i].Backlog; b != nil {
			out[i].Oldest = humanDuration(secondsDuration(b.IdadeMaisAntigaSegundos))
		}
		out[i].Metrics = s.sampler.metrics(u.Name)
	}
	s.render(w, r, sess, http.StatusOK, "backlogs", "Backlogs", down, out)
}

// ConfirmPage asks the operator to confirm an action.
type ConfirmPage struct {
	Action, Service, EventID, Back string
}

func (s *Server) confirmRequeue(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	svc, id := q.Get("service"), q.Get("id")
	if _, ok := s.upstream(svc); !ok {
		s.message(w, r, sess, http.StatusBadRequest, "Refused", "Unknown service.")
		return
	}
	if _, ok := httpapi.ParseUUID(id); !ok {
		s.message(w, r, sess, http.StatusBadRequest, "Refused", "The event id must be a UUID.")
		return
	}
	back := q.Get("back")
	if !strings.HasPrefix(back, "/transfers/") || strings.ContainsAny(back, "?#\\") {
		back = "/backlogs"
	}
	s.render(w, r, sess, http.StatusOK, "confirm", "Confirm requeue", nil,
		ConfirmPage{Action: "/actions/requeue", Service: svc, EventID: id, Back: back})
}

// action is the frame of every action: the one-time CSRF token is spent
// first (a replayed, forged or double-submitted form changes nothing),
// then the session's rate limit, then fn runs audited with the operator
// as the principal.
func (s *Server) action(name string, fn func(w http.ResponseWriter, r *http.Request, sess *session, a *auth.AuditRecord)) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, sess *session) {
		if err := r.ParseForm(); err != nil || !s.sessions.spend(sess, r.PostFormValue("csrf")) {
			s.log.WarnContext(r.Context(), "console action refused: bad or spent CSRF token", "action", name)
			s.message(w, r, sess, http.StatusForbidden, "Refused",
				"This form was already submitted or has expired: nothing was changed. Reload the page to act again.")
			return
		}
		if !s.sessions.allowAction(sess, s.cfg.ActionsPerMinute) {
			w.Header().Set("Retry-After", "60")
			s.message(w, r, sess, http.StatusTooManyRequests, "Too many actions",
				fmt.Sprintf("At most %d actions a minute: nothing was changed.", s.cfg.ActionsPerMinute))
			return
		}
		ctx := auth.WithPrincipal(r.Context(), sess.principal)
		auth.Audited(s.log, name, func(w http.ResponseWriter, r *http.Request, _ auth.Principal, a *auth.AuditRecord) {
			fn(w, r, sess, a)
		})(w, r.WithContext(ctx))
	}
}

// RequeueResult is the outcome of a requeue.
type requeueAnswer struct {
	Reenfileirados int64 `json:"reenfileirados"`
}

func (s *Server) requeue(w http.ResponseWriter, r *http.Request, sess *session, a *auth.AuditRecord) {
	u, ok := s.upstream(r.PostFormValue("service"))
	id, okID := httpapi.ParseUUID(r.PostFormValue("id"))
	if !ok || !okID {
		s.message(w, r, sess, http.StatusBadRequest, "Refused", "Unknown service or malformed event id: nothing was changed.")
		return
	}
	a.Resource("service", u.Name)
	a.Resource("evento_id", id)
	path := "/ops/outbox/" + id.String() + "/reenfileirar"
	if reason := strings.TrimSpace(r.PostFormValue("reason")); reason != "" {
		path += "?" + url.Values{"motivo": {reason}}.Encode()
	}
	var ans requeueAnswer
	if err := s.client.do(r.Context(), u, sess.token, http.MethodPost, path, &ans); err != nil {
		s.upstreamFailed(w, r, sess, err)
		return
	}
	a.Resource("requeued", ans.Reenfileirados)
	s.log.InfoContext(r.Context(), "console requeue", slog.String("service", u.Name), slog.Int64("requeued", ans.Reenfileirados))
	back := r.PostFormValue("back")
	if !strings.HasPrefix(back, "/transfers/") || strings.ContainsAny(back, "?#\\") {
		back = "/backlogs"
	}
	text := fmt.Sprintf("Event %s requeued in the %s outbox: the relay publishes it now.", id, u.Name)
	if ans.Reenfileirados == 0 {
		text = fmt.Sprintf("Nothing requeued: event %s is not DEAD in the %s outbox (already requeued?).", id, u.Name)
	}
	s.render(w, r, sess, http.StatusOK, "message", "Requeue", nil, Message{Heading: "Requeue", Text: text, Back: back})
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
