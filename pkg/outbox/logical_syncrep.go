package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// A primary counts every replication connection whose application_name
// synchronous_standby_names matches as a synchronous standby candidate,
// the logical relay's included ('*' matches them all). Were the relay's
// walsender chosen, no commit would finish: a commit waits for the relay
// to confirm its position, the relay confirms a transaction only once it
// has published it, and it publishes only what is visible, which the
// waiting commit is not.
//
// The server takes a walsender as a candidate only once it reports a valid
// (non-zero) flush position. So the relay confirms nothing (it reports
// position 0) until it has read synchronous_standby_names and found that
// it does not match its application_name; and whenever it later matches
// (a reload), the relay reports 0 again, which takes its walsender out of
// the candidates at the next standby reply. It keeps publishing meanwhile:
// its slot holds the WAL since its last confirmation, a restart resends
// from there (duplicates, never a loss), and
// outbox_logical_synchronous_candidate raises the alert
// OutboxLogicalSynchronousCandidate. pg_stat_replication cannot answer
// this by itself: it shows a walsender that reports no flush position
// with priority 0 ("async") whatever the setting. So the relay parses the
// setting itself, and also counts a sync_priority above 0 that the view
// shows for its walsender while it confirms (a setting its parser
// misread), until the setting changes. Any priority counts, not only
// sync_state 'sync' or 'quorum': a 'potential' candidate becomes the
// synchronous one the moment the standby stops.
//
// The relay's replication connection carries its slot's name as
// application_name, so that a synchronous_standby_names naming the
// standbys never matches it.

// The relay's view of its walsender's synchronous priority.
const (
	syncUnknown   int32 = iota // not read yet on this stream: confirm nothing
	syncAsync                  // sync_priority 0: confirm
	syncCandidate              // sync_priority > 0: confirm nothing, alert
)

// syncPrioritySQL reads the synchronous priority of one walsender; NULL
// when the role may not see it.
const syncPrioritySQL = `SELECT sync_priority FROM pg_stat_replication WHERE pid = $1`

// syncWatch tracks whether the server counts this stream's walsender as a
// synchronous standby candidate.
type syncWatch struct {
	r     *LogicalRelay
	pid   uint32
	app   string
	state atomic.Int32
	// seenBy is the setting under which pg_stat_replication showed the
	// walsender with a priority: a candidate until the setting changes.
	seenBy *string
}

// confirms reports whether the stream may confirm its position.
func (w *syncWatch) confirms() bool { return w.state.Load() == syncAsync }

// run checks at once, then every StatusInterval, until ctx ends.
func (w *syncWatch) run(ctx context.Context) {
	w.check(ctx)
	periodic.Every(ctx, periodic.Fixed(w.r.cfg.StatusInterval), func() { w.check(ctx) })
}

// check reads the setting and the walsender's priority; a failed read
// keeps the last verdict.
func (w *syncWatch) check(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	defer cancel()
	var names string
	if err := w.r.ob.db.QueryRow(qctx, `SHOW synchronous_standby_names`).Scan(&names); err != nil {
		if ctx.Err() == nil {
			w.r.log.DebugContext(ctx, "outbox logical relay: read synchronous_standby_names", "err", err)
		}
		return
	}
	match, err := matchesSyncNames(names, w.app)
	if err != nil {
		match = true // the server took it; a relay that cannot read it must not risk being chosen
		w.r.log.ErrorContext(ctx, "outbox logical relay cannot parse synchronous_standby_names; it counts itself a candidate", "err", err)
	}
	var priority *int32
	err = w.r.ob.db.QueryRow(qctx, syncPrioritySQL, int64(w.pid)).Scan(&priority)
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		if ctx.Err() == nil {
			w.r.log.DebugContext(ctx, "outbox logical relay: read its walsender's synchronous priority", "err", err)
		}
		return
	case priority != nil && *priority > 0:
		w.seenBy = &names
	}
	if w.seenBy != nil && *w.seenBy == names {
		match = true
	} else {
		w.seenBy = nil
	}
	next := syncAsync
	if match {
		next = syncCandidate
	}
	prev := w.state.Swap(next)
	if next == prev {
		return
	}
	if next == syncCandidate {
		w.r.lm.SyncCandidate.Set(1)
		w.r.log.ErrorContext(ctx, "outbox logical relay's replication connection is a synchronous standby candidate: it confirms nothing (its slot holds WAL) until synchronous_standby_names stops matching it; name the standbys there, not '*'",
			"slot", w.r.slotName(), "application_name", w.app, "synchronous_standby_names", names)
		return
	}
	w.r.lm.SyncCandidate.Set(0)
	if prev == syncCandidate {
		w.r.log.InfoContext(ctx, "outbox logical relay is no longer a synchronous standby candidate; it confirms again", "slot", w.r.slotName())
	}
}

// matchesSyncNames reports whether synchronous_standby_names v lists
// application name app, as the server matches it: '*' matches every name,
// others match case-insensitively, quoted or not. v is
// "[FIRST|ANY] num (name, ...)" or "name, ...".
func matchesSyncNames(v, app string) (bool, error) {
	toks, err := syncNameTokens(v)
	if err != nil {
		return false, err
	}
	if len(toks) == 0 {
		return false, nil
	}
	list := toks
	if i := slices.IndexFunc(toks, func(t syncToken) bool { return !t.quoted && t.text == "(" }); i >= 0 {
		if toks[len(toks)-1].text != ")" || toks[len(toks)-1].quoted || i > 2 {
			return false, fmt.Errorf("synchronous_standby_names %q: unbalanced list", v)
		}
		list = toks[i+1 : len(toks)-1]
	}
	for _, t := range list {
		if !t.quoted && t.text == "," {
			continue
		}
		if t.text == "*" || strings.EqualFold(t.text, app) {
			return true, nil
		}
	}
	return false, nil
}

type syncToken struct {
	text   string
	quoted bool
}

// syncNameTokens splits synchronous_standby_names into names, numbers,
// keywords, "(", ")" and ",": a double-quoted name may hold any character,
// "" being a quote.
func syncNameTokens(v string) ([]syncToken, error) {
	var out []syncToken
	for i := 0; i < len(v); {
		c := v[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
		case '(', ')', ',', '*':
			out = append(out, syncToken{text: string(c)})
			i++
		case '"':
			var b strings.Builder
			for i++; ; i++ {
				if i >= len(v) {
					return nil, fmt.Errorf("synchronous_standby_names %q: unterminated quoted name", v)
				}
				if v[i] == '"' {
					if i+1 < len(v) && v[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					i++
					break
				}
				b.WriteByte(v[i])
			}
			out = append(out, syncToken{text: b.String(), quoted: true})
		default:
			j := i
			for j < len(v) && !strings.ContainsRune(" \t\n\r(),\"", rune(v[j])) {
				j++
			}
			out = append(out, syncToken{text: v[i:j]})
			i = j
		}
	}
	return out, nil
}
