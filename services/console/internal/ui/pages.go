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
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.s.client.do(f.ctx, u, f.token, http.MethodGet, path, out)
		f.mu.Lock()
		defer f.mu.Unlock()
		var down *downError
		switch {
		case err == nil:
			*found = true
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
	var tr opsTransfer
	var dec opsDecision
	var set opsSettlement
	var notes opsNotifications
	var tOut, aOut, lOut opsEvents
	var tLog, aLog, lLog opsBacklog
	var hasTr, hasDec, hasSet, hasNotes, hasTOut, hasAOut, hasLOut, hasTLog, hasALog, hasLLog bool
	sid := id.String()
	f.get(s.cfg.Transfers, "/ops/transferencias/"+sid, &tr, &hasTr)
	f.get(s.cfg.Transfers, "/ops/outbox/transferencias/"+sid, &tOut, &hasTOut)
	f.get(s.cfg.Transfers, "/ops/outbox", &tLog, &hasTLog)
	f.get(s.cfg.Antifraud, "/ops/decisoes/"+sid, &dec, &hasDec)
	f.get(s.cfg.Antifraud, "/ops/outbox/transferencias/"+sid, &aOut, &hasAOut)
	f.get(s.cfg.Antifraud, "/ops/outbox", &aLog, &hasALog)
	f.get(s.cfg.Ledger, "/ops/liquidacoes/"+sid, &set, &hasSet)
	f.get(s.cfg.Ledger, "/ops/outbox/transferencias/"+sid, &lOut, &hasLOut)
	f.get(s.cfg.Ledger, "/ops/outbox", &lLog, &hasLLog)
	f.get(s.cfg.Notifications, "/ops/notificacoes/"+sid, &notes, &hasNotes)
	down := f.wait()
	if f.signedOut {
		s.upstreamFailed(w, r, sess, errSignedOut)
		return
	}
	if len(f.other) > 0 {
		s.upstreamFailed(w, r, sess, f.other[0])
		return
	}
	p.down = map[string]bool{}
	for name := range f.down {
		p.down[name] = true
	}
	if !hasTr && !p.down["transfers"] {
		s.render(w, r, sess, http.StatusNotFound, "find", "Find", down, FindPage{Query: sid,
			Error: "No transfer has the id " + sid + "."})
		return
	}
	if hasTr {
		p.transfer = &tr
	}
	if hasDec {
		p.decision = &dec
	}
	if hasSet {
		p.settlement = &set
	}
	if hasNotes {
		p.notifications = &notes
	}
	if hasTOut {
		p.transfersOut = &tOut
	}
	if hasAOut {
		p.antifraudOut = &aOut
	}
	if hasLOut {
		p.ledgerOut = &lOut
	}
	if hasTLog {
		p.transfersLog = &tLog
	}
	if hasALog {
		p.antifraudLog = &aLog
	}
	if hasLLog {
		p.ledgerBacklog = &lLog
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
	var acc account
	var posts postingsPage
	var trs opsTransferPage
	var hasAcc, hasPosts, hasTrs bool
	esc := url.PathEscape(id)
	pq := url.Values{"limite": {"10"}}
	if c := q.Get("lancamentos"); c != "" {
		pq.Set("cursor", c)
	}
	tq := url.Values{"limite": {"10"}}
	if c := q.Get("transferencias"); c != "" {
		tq.Set("apos", c)
	}
	f.get(s.cfg.Ledger, "/contas/"+esc, &acc, &hasAcc)
	f.get(s.cfg.Ledger, "/contas/"+esc+"/lancamentos?"+pq.Encode(), &posts, &hasPosts)
	f.get(s.cfg.Transfers, "/ops/contas/"+esc+"/transferencias?"+tq.Encode(), &trs, &hasTrs)
	down := f.wait()
	if f.signedOut {
		s.upstreamFailed(w, r, sess, errSignedOut)
		return
	}
	if len(f.other) > 0 {
		s.upstreamFailed(w, r, sess, f.other[0])
		return
	}
	if !hasAcc && f.down["ledger"] == "" {
		s.render(w, r, sess, http.StatusNotFound, "find", "Find", down, FindPage{Query: id, Error: "No account has the id " + id + "."})
		return
	}
	page := AccountPage{ID: id}
	if hasAcc {
		page.Account = &acc
	}
	if hasPosts {
		page.Postings = &posts
		if posts.ProximoCursor != nil {
			v := url.Values{"lancamentos": {*posts.ProximoCursor}}
			if c := q.Get("transferencias"); c != "" {
				v.Set("transferencias", c)
			}
			page.NextPostings = "/accounts/" + esc + "?" + v.Encode()
		}
	}
	if hasTrs {
		page.Transfers = &trs
		if trs.Proxima != "" {
			v := url.Values{"transferencias": {trs.Proxima}}
			if c := q.Get("lancamentos"); c != "" {
				v.Set("lancamentos", c)
			}
			page.NextTransfers = "/accounts/" + esc + "?" + v.Encode()
		}
	}
	s.render(w, r, sess, http.StatusOK, "account", "Account "+id, down, page)
}

// ServiceBacklog is one service's outbox backlog on the backlogs page.
type ServiceBacklog struct {
	Service string
	Backlog *opsBacklog
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
	logs := make([]opsBacklog, len(ups))
	found := make([]bool, len(ups))
	dlts := make([]opsapi.DLTs, len(ups))
	foundDLT := make([]bool, len(ups))
	for i, u := range ups {
		f.get(u, "/ops/outbox", &logs[i], &found[i])
		if writesDLTs(u.Name) {
			f.get(u, "/ops/dlt", &dlts[i], &foundDLT[i])
		}
	}
	down := f.wait()
	if f.signedOut {
		s.upstreamFailed(w, r, sess, errSignedOut)
		return
	}
	var out []ServiceBacklog
	for i, u := range ups {
		sb := ServiceBacklog{Service: u.Name}
		if found[i] {
			sb.Backlog = &logs[i]
			sb.Oldest = humanDuration(secondsDuration(logs[i].IdadeMaisAntigaSegundos))
		}
		if foundDLT[i] {
			sb.DLTs = &dlts[i]
		}
		sb.Metrics = s.sampler.metrics(u.Name)
		out = append(out, sb)
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
	a.Resource("event_id", id)
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
