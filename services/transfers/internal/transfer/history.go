package transfer

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/paysuite/payments/pkg/errkind"
)

// Page sizes of GET /transferencias (CONTRACTS.md section 11).
const (
	DefaultHistoryLimit = 50
	MaxHistoryLimit     = 200
)

// Statuses are every status a transfer can have, for a listing that asks
// for none in particular.
var Statuses = []Status{StatusPending, StatusReserved, StatusSettled, StatusRejected, StatusCancelled, StatusExpired}

// Filter is what a listing is narrowed to (the query parameters of
// GET /transferencias). The zero Filter lists everything its viewer sees.
type Filter struct {
	// Account (conta) keeps the transfers from or to it; "" any.
	Account string
	// Statuses (status) keeps the transfers in one of them; nil any.
	Statuses []Status
	// Since (desde) and Until (ate) keep the transfers created in
	// [Since, Until); a zero time does not bound.
	Since, Until time.Time
	// Client (cliente, operators only) lists the history of that client:
	// what it created or was paid; "" every client.
	Client string
}

// normal is f with its statuses sorted and without repeats, and its
// bounds in UTC rounded up to the microsecond, the precision of criada_em:
// a transfer created at or after Since is created at or after the
// rounded Since, and likewise for Until.
func (f Filter) normal() Filter {
	f.Statuses = slices.Compact(slices.Sorted(slices.Values(f.Statuses)))
	f.Since, f.Until = ceilMicro(f.Since), ceilMicro(f.Until)
	return f
}

func ceilMicro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	u := t.UTC().Truncate(time.Microsecond)
	if u.Before(t) {
		u = u.Add(time.Microsecond)
	}
	return u
}

// equal reports whether f and g, both normal, are the same filter.
func (f Filter) equal(g Filter) bool {
	return f.Account == g.Account && slices.Equal(f.Statuses, g.Statuses) && f.Since.Equal(g.Since) &&
		f.Until.Equal(g.Until) && f.Client == g.Client
}

// HistoryQuery is one read of a listing, as the store runs it: at most
// Limit transfers of Party (created by it or paid into an account it
// holds; "" every client's), from or to Account when not "", in one of
// Statuses, created at or after Since, and before (Before, BeforeID) in
// the order (criada_em, id), newest first.
type HistoryQuery struct {
	Party    string
	Account  string
	Statuses []Status
	Since    time.Time
	Before   time.Time
	BeforeID uuid.UUID
	Limit    int
}

// HistoryStore reads listings (postgres.Store).
type HistoryStore interface {
	// History returns the transfers q selects, newest first, in the
	// order (criada_em, id).
	History(ctx context.Context, q HistoryQuery) ([]Transfer, error)
}

// Page is one page of a listing: its transfers, newest first, and the
// cursor of the next page, "" on the last.
type Page struct {
	Items []Transfer
	Next  string
}

// History lists transfers a page at a time (GET /transferencias). Its
// cursors are opaque: they carry the position, the filter and the client
// they were given to, authenticated with an HMAC under its key, so that
// a cursor changed by hand, made up, or given to another client is
// refused, and the next page is always of the first page's filter.
type History struct {
	store HistoryStore
	key   []byte
}

// NewHistory returns the listing of store, whose cursors are
// authenticated with key (32 bytes or more).
func NewHistory(store HistoryStore, key []byte) (*History, error) {
	if len(key) < 32 {
		return nil, errors.New("the listing's cursor key is shorter than 32 bytes")
	}
	return &History{store: store, key: key}, nil
}

// Errors of a listing's request, each a 400 naming its parameter.
var (
	// ErrForeignCursor: a cursor not made by this service for this
	// client, or changed since.
	ErrForeignCursor = BadParam("cursor", "is not a cursor this client was given")
	// ErrCursorFilters: a cursor with filters other than its own.
	ErrCursorFilters = BadParam("cursor", "carries the filters of its first page: send it alone, or with exactly those filters")
	// ErrClientFilter: cliente from a client that is not an operator.
	ErrClientFilter = BadParam("cliente", "is for operators only: a client lists its own transfers")
	// ErrEmptyRange: desde not before ate.
	ErrEmptyRange = BadParam("ate", "must be after desde")
)

// BadParam is the error of a listing's query parameter name, which
// message explains: errkind.Malformed (400) naming it.
func BadParam(name, message string) *errkind.Error {
	return &errkind.Error{Kind: errkind.Malformed, Detail: "invalid query parameter",
		Fields: []errkind.FieldError{{Field: name, Message: message}}}
}

// List returns the page of v's listing that follows cursor ("" for the
// first page), of at most limit transfers (1..MaxHistoryLimit), newest
// first, in the order (criada_em, id). A client sees what it created and
// what was paid into an account it holds (Viewer.Sees); an operator sees
// everything, or one client's listing with f.Client. With a cursor, f is
// either the zero Filter or the filter the cursor carries. Errors:
// ErrForeignCursor, ErrCursorFilters, ErrClientFilter, ErrEmptyRange.
func (h *History) List(ctx context.Context, v Viewer, f Filter, limit int, cursor string) (Page, error) {
	f = f.normal()
	if f.Client != "" && !v.All {
		return Page{}, ErrClientFilter
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return Page{}, ErrEmptyRange
	}
	q := HistoryQuery{Limit: limit + 1}
	if cursor != "" {
		c, err := h.open(cursor, v.Client)
		if err != nil {
			return Page{}, err
		}
		if !f.equal(Filter{}) && !f.equal(c.Filter) {
			return Page{}, ErrCursorFilters
		}
		f, q.Before, q.BeforeID = c.Filter, c.At, c.ID
	}
	q.Party, q.Account, q.Statuses, q.Since = v.Client, f.Account, f.Statuses, f.Since
	if v.All {
		q.Party = f.Client
	}
	if len(q.Statuses) == 0 {
		q.Statuses = Statuses
	}
	if cursor == "" {
		// (criada_em, id) < (Until, uuid.Nil) is criada_em < Until.
		q.Before = f.Until
		if q.Before.IsZero() {
			q.Before = farFuture
		}
	}
	if q.Since.IsZero() {
		q.Since = farPast
	}
	ts, err := h.store.History(ctx, q)
	if err != nil {
		return Page{}, err
	}
	p := Page{Items: ts}
	if len(ts) > limit {
		p.Items = ts[:limit]
		last := p.Items[limit-1]
		if p.Next, err = h.seal(cursorBody{Filter: f, At: last.CreatedAt, ID: last.ID}, v.Client); err != nil {
			return Page{}, err
		}
	}
	return p, nil
}

// The bounds of a listing without desde or ate: beyond any transfer's
// creation time, within PostgreSQL's timestamptz.
var (
	farPast   = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	farFuture = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// cursorBody is what a cursor carries: the filter of its listing and the
// position (creation time and id) of the last transfer of its page.
type cursorBody struct {
	Filter Filter
	At     time.Time
	ID     uuid.UUID
}

// cursorWire is cursorBody as its JSON: short names, times in Unix
// microseconds (0: unbounded), and the client it was given to.
type cursorWire struct {
	Version  int       `json:"v"`
	Caller   string    `json:"c"`
	Account  string    `json:"a,omitempty"`
	Statuses []Status  `json:"s,omitempty"`
	Since    int64     `json:"d,omitempty"`
	Until    int64     `json:"u,omitempty"`
	Client   string    `json:"k,omitempty"`
	At       int64     `json:"t"`
	ID       uuid.UUID `json:"i"`
}

const cursorVersion = 1

// seal is the cursor of b for caller: its JSON and the HMAC-SHA-256 of
// the JSON under h's key, each in unpadded base64url, joined by a dot.
func (h *History) seal(b cursorBody, caller string) (string, error) {
	w := cursorWire{Version: cursorVersion, Caller: caller, Account: b.Filter.Account, Statuses: b.Filter.Statuses,
		Since: micros(b.Filter.Since), Until: micros(b.Filter.Until), Client: b.Filter.Client, At: b.At.UnixMicro(), ID: b.ID}
	data, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("encode a cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(data) + "." + base64.RawURLEncoding.EncodeToString(h.mac(data)), nil
}

// open is the body of cursor s when h made it for caller; otherwise
// ErrForeignCursor.
func (h *History) open(s, caller string) (cursorBody, error) {
	enc, sum, ok := strings.Cut(s, ".")
	if !ok {
		return cursorBody{}, ErrForeignCursor
	}
	data, err1 := base64.RawURLEncoding.DecodeString(enc)
	mac, err2 := base64.RawURLEncoding.DecodeString(sum)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, h.mac(data)) {
		return cursorBody{}, ErrForeignCursor
	}
	var w cursorWire
	if err := json.Unmarshal(data, &w); err != nil || w.Version != cursorVersion || w.Caller != caller {
		return cursorBody{}, ErrForeignCursor
	}
	f := Filter{Account: w.Account, Statuses: w.Statuses, Since: fromMicros(w.Since), Until: fromMicros(w.Until), Client: w.Client}
	return cursorBody{Filter: f, At: time.UnixMicro(w.At).UTC(), ID: w.ID}, nil
}

func (h *History) mac(data []byte) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write(data)
	return m.Sum(nil)
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}
