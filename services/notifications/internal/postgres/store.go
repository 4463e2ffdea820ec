// Package postgres is the notification log on PostgreSQL.
package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications/internal/notify"
)

var _ notify.Store = (*Store)(nil)

// Store is the notification log table.
type Store struct {
	db *pg.DB
}

// New returns the log on db.
func New(db *pg.DB) *Store { return &Store{db: db} }

const (
	// lockSQL and unlockSQL take and give back the event's claim: a
	// session-level advisory lock, held on one connection across the send
	// but inside no transaction (no snapshot kept, no row locked). A
	// concurrent delivery of the same event waits for it; a crash releases
	// it with the connection.
	lockSQL   = `SELECT pg_advisory_lock(hashtext('notification'), hashtext($1::text))`
	unlockSQL = `SELECT pg_advisory_unlock(hashtext('notification'), hashtext($1::text))`

	// insertSQL creates the entry if there is none.
	insertSQL = `
INSERT INTO notification (event_id, transfer_id, event_type, source_account, channel)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (event_id) DO NOTHING`

	readSQL = `
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error
FROM notification
WHERE event_id = $1`

	// recordSQL counts the attempt in the entry and writes its
	// notification_attempt row ($6 the topic), in one statement.
	recordSQL = `
WITH u AS (
    UPDATE notification
    SET status = $2, channel = $3, attempts = attempts + 1, delivered_at = $4, last_error = $5, updated_at = now()
    WHERE event_id = $1
    RETURNING event_id, transfer_id, channel, status, attempts, delivered_at, last_error
), a AS (
    INSERT INTO notification_attempt (event_id, attempt, transfer_id, channel, topic, outcome, error)
    SELECT event_id, attempts, transfer_id, channel, $6, status, last_error FROM u
)
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error FROM u`

	getSQL = `
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error
FROM notification
WHERE event_id = $1`
)

// maxErrorLen bounds the stored error text, in bytes.
const maxErrorLen = 1000

// sanitize makes an error text fit to store and show: valid UTF-8, control
// characters as spaces (a receiver's answer may hold anything), cut to
// maxErrorLen bytes on a character boundary.
func sanitize(msg string) string {
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(msg, "\uFFFD"))
	if len(msg) <= maxErrorLen {
		return msg
	}
	cut := maxErrorLen
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// Claim implements notify.Store in three steps, none of which keeps a
// transaction open across the send: claim (the event's advisory lock, then
// the entry created and read, each statement its own transaction), attempt
// (the send, outside any transaction), record (one UPDATE). attempt runs
// exactly once per call.
func (s *Store) Claim(ctx context.Context, n notify.Notification, channel string,
	attempt func(e notify.Entry) (notify.Outcome, bool)) (entry notify.Entry, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("notification log %s: %w", n.EventID, err)
		}
	}()
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return notify.Entry{}, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, lockSQL, n.EventID); err != nil {
		return notify.Entry{}, fmt.Errorf("claim: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, unlockSQL, n.EventID); uerr != nil {
			// A connection that may still hold the lock must not go back
			// to the pool: closing it releases the lock.
			_ = conn.Conn().Close(uctx)
		}
	}()
	if _, err := conn.Exec(ctx, insertSQL, n.EventID, n.TransferID, n.EventType, n.Account, channel); err != nil {
		return notify.Entry{}, fmt.Errorf("insert notification: %w", err)
	}
	e, err := scan(conn.QueryRow(ctx, readSQL, n.EventID))
	if err != nil {
		return notify.Entry{}, fmt.Errorf("read notification: %w", err)
	}
	o, ok := attempt(e)
	if !ok {
		return e, nil
	}
	var deliveredAt *time.Time
	if o.Status == notify.StatusDelivered {
		at := o.At.UTC()
		deliveredAt = &at
	}
	var lastError *string
	if o.Err != nil {
		msg := sanitize(o.Err.Error())
		lastError = &msg
	}
	// The outcome is recorded even if ctx ended during the send.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out, err := scan(conn.QueryRow(rctx, recordSQL, n.EventID, string(o.Status), channel, deliveredAt, lastError, n.Topic))
	if err != nil {
		return notify.Entry{}, fmt.Errorf("record notification: %w", err)
	}
	return out, nil
}

// The batch statements of ClaimAll. The claims are taken in key order, so
// that two batches sharing events cannot deadlock (Claim takes one claim
// and holds no other).
const (
	lockAllSQL = `
SELECT pg_advisory_lock(hashtext('notification'), k.h)
FROM (SELECT DISTINCT hashtext(e::text) AS h FROM unnest($1::uuid[]) AS e ORDER BY h) AS k`
	unlockAllSQL = `
SELECT pg_advisory_unlock(hashtext('notification'), k.h)
FROM (SELECT DISTINCT hashtext(e::text) AS h FROM unnest($1::uuid[]) AS e) AS k`

	insertAllSQL = `
INSERT INTO notification (event_id, transfer_id, event_type, source_account, channel)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[])
ON CONFLICT (event_id) DO NOTHING`

	readAllSQL = `
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error
FROM notification
WHERE event_id = ANY($1::uuid[])`

	// recordAllSQL is recordSQL for many entries, $7 their topics.
	recordAllSQL = `
WITH u AS (
    UPDATE notification AS n
    SET status = r.status, channel = $6, attempts = n.attempts + 1, delivered_at = r.delivered_at,
        last_error = CASE WHEN r.has_error THEN r.last_error END, updated_at = now()
    FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::text[], $5::bool[], $7::text[])
         AS r(event_id, status, delivered_at, last_error, has_error, topic)
    WHERE n.event_id = r.event_id
    RETURNING n.event_id, n.transfer_id, n.channel, n.status, n.attempts, n.delivered_at, n.last_error, r.topic
), a AS (
    INSERT INTO notification_attempt (event_id, attempt, transfer_id, channel, topic, outcome, error)
    SELECT event_id, attempts, transfer_id, channel, topic, status, last_error FROM u
)
SELECT event_id, transfer_id, channel, status, attempts, delivered_at, last_error FROM u`
)

// ClaimAll implements notify.Store: Claim's three steps for a batch, each
// step one round trip (the claims, the entries created and read, pipelined;
// the sends; the outcomes recorded).
func (s *Store) ClaimAll(ctx context.Context, ns []notify.Notification, channel string,
	attempt func(i int, e notify.Entry) (notify.Outcome, bool, bool)) (entries []notify.Entry, err error) {
	if len(ns) == 0 {
		return nil, nil
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("notification log, %d events: %w", len(ns), err)
		}
	}()
	n := len(ns)
	ids, transfers := make([][16]byte, n), make([][16]byte, n)
	types, accounts, channels := make([]string, n), make([]string, n), make([]string, n)
	for i, x := range ns {
		ids[i], transfers[i] = x.EventID, x.TransferID
		types[i], accounts[i], channels[i] = x.EventType, x.Account, channel
	}
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	locked := false
	defer func() {
		if !locked {
			return
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, unlockAllSQL, ids); uerr != nil {
			// A connection that may still hold the locks must not go back
			// to the pool: closing it releases them.
			_ = conn.Conn().Close(uctx)
		}
	}()
	// The batch is one implicit transaction, whose statements run on their
	// generic plans with sequential scans off (pg.GenericPlanSQL): made on
	// a new deployment's almost empty table, a plan would otherwise read
	// the whole log for every batch as it grows.
	b := &pgx.Batch{}
	b.Queue(pg.GenericPlanSQL)
	b.Queue(lockAllSQL, ids)
	b.Queue(insertAllSQL, ids, transfers, types, accounts, channels)
	b.Queue(readAllSQL, ids)
	br := conn.SendBatch(ctx, b)
	if _, err = br.Exec(); err != nil {
		_ = br.Close()
		return nil, fmt.Errorf("plan settings: %w", err)
	}
	_, err = br.Exec()
	// Whatever came back, the locks may be held: unlock them at the end
	// (unlocking a lock not held only warns).
	locked = true
	if err != nil {
		_ = br.Close()
		return nil, fmt.Errorf("claim: %w", err)
	}
	if _, err = br.Exec(); err != nil {
		_ = br.Close()
		return nil, fmt.Errorf("insert notifications: %w", err)
	}
	byID, err := scanAll(br.Query())
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("read notifications: %w", err)
	}

	entries = make([]notify.Entry, n)
	var (
		rIDs               [][16]byte
		rStatuses, rErrors []string
		rTopics            []string
		rDelivered         []*time.Time
		rHasError          []bool
	)
	for i, x := range ns {
		e, ok := byID[x.EventID]
		if !ok {
			return nil, fmt.Errorf("notification %s neither created nor found", x.EventID)
		}
		entries[i] = e
		o, record, stop := attempt(i, e)
		if record {
			var deliveredAt *time.Time
			if o.Status == notify.StatusDelivered {
				at := o.At.UTC()
				deliveredAt = &at
			}
			msg := ""
			if o.Err != nil {
				msg = sanitize(o.Err.Error())
			}
			rIDs = append(rIDs, x.EventID)
			rStatuses, rDelivered = append(rStatuses, string(o.Status)), append(rDelivered, deliveredAt)
			rErrors, rHasError = append(rErrors, msg), append(rHasError, o.Err != nil)
			rTopics = append(rTopics, x.Topic)
		}
		if stop {
			break
		}
	}
	if len(rIDs) == 0 {
		return entries, nil
	}
	// The outcomes are recorded even if ctx ended during the sends.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rb := &pgx.Batch{}
	rb.Queue(pg.GenericPlanSQL)
	rb.Queue(recordAllSQL, rIDs, rStatuses, rDelivered, rErrors, rHasError, channel, rTopics)
	rr := conn.SendBatch(rctx, rb)
	if _, err := rr.Exec(); err != nil {
		_ = rr.Close()
		return nil, fmt.Errorf("record notifications: plan settings: %w", err)
	}
	recorded, err := scanAll(rr.Query())
	if cerr := rr.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("record notifications: %w", err)
	}
	for i, x := range ns {
		if e, ok := recorded[x.EventID]; ok {
			entries[i] = e
		}
	}
	return entries, nil
}

func scanAll(rows pgx.Rows, err error) (map[uuid.UUID]notify.Entry, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uuid.UUID]notify.Entry{}
	for rows.Next() {
		e, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out[e.EventID] = e
	}
	return out, rows.Err()
}

// Get implements notify.Store; it returns notify.ErrNotFound when the event
// has no entry.
func (s *Store) Get(ctx context.Context, eventID uuid.UUID) (notify.Entry, error) {
	return pg.ScanOne(s.db.QueryRow(ctx, getSQL, eventID), scan, notify.ErrNotFound, "get notification "+eventID.String())
}

func scan(row pgx.Row) (notify.Entry, error) {
	var (
		e           notify.Entry
		status      string
		deliveredAt *time.Time
		lastError   *string
	)
	if err := row.Scan(&e.EventID, &e.TransferID, &e.Channel, &status, &e.Attempts, &deliveredAt, &lastError); err != nil {
		return notify.Entry{}, err
	}
	e.Status = notify.Status(status)
	if deliveredAt != nil {
		e.DeliveredAt = *deliveredAt
	}
	if lastError != nil {
		e.LastError = *lastError
	}
	return e, nil
}
