package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
)

// decode handles one pgoutput message.
func (s *streamState) decode(wal []byte) error {
	msg, err := pglogrepl.Parse(wal)
	if err != nil {
		return fmt.Errorf("parse pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		s.relations[m.RelationID] = m
	case *pglogrepl.BeginMessage:
		s.cur, s.curTime, s.curXid = s.cur[:0], m.CommitTime, m.Xid
	case *pglogrepl.InsertMessage:
		rel, ok := s.relations[m.RelationID]
		if !ok {
			return fmt.Errorf("insert into unknown relation %d", m.RelationID)
		}
		if rel.RelationName != "outbox_event" {
			return nil
		}
		c, send, err := decodeRow(rel, m.Tuple)
		if err != nil {
			return err
		}
		if send {
			if c.enqueuedAt.IsZero() {
				c.enqueuedAt = s.curTime
			}
			s.cur = append(s.cur, c)
		}
	case *pglogrepl.CommitMessage:
		s.lastData = time.Now()
		if !s.hasPending {
			s.pending = walBatch{oldest: m.CommitTime, hasTime: true}
			s.hasPending = true
		}
		if len(s.cur) > 0 {
			s.pending.xids = append(s.pending.xids, s.curXid)
		}
		s.pending.events = append(s.pending.events, s.cur...)
		s.pending.endLSN = uint64(m.TransactionEndLSN)
		s.cur = nil
	}
	return nil
}

// decodeRow reads an outbox_event insert (text format). send is false for
// a row inserted in another status than PENDING or DEAD; a DEAD one comes
// back as holdOnly.
func decodeRow(rel *pglogrepl.RelationMessage, t *pglogrepl.TupleData) (c claimed, send bool, err error) {
	if t == nil {
		return c, false, errors.New("insert without a tuple")
	}
	status := "PENDING"
	for i, col := range t.Columns {
		if i >= len(rel.Columns) || col.DataType != pglogrepl.TupleDataTypeText {
			continue
		}
		v := col.Data
		switch rel.Columns[i].Name {
		case "id":
			if c.id, err = uuid.ParseBytes(v); err != nil {
				return c, false, fmt.Errorf("outbox row id %q: %w", v, err)
			}
		case "seq":
			if c.seq, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return c, false, fmt.Errorf("outbox row seq %q: %w", v, err)
			}
		case "topic":
			c.topic = string(v)
		case "key":
			c.key = string(v)
		case "event_type":
			c.eventType = string(v)
		case "payload":
			c.payload = append([]byte(nil), v...)
		case "headers":
			if err := json.Unmarshal(v, &c.headers); err != nil {
				c.headers = nil // a broken header map must not block the event
			}
		case "enqueued_at":
			c.enqueuedAt = parsePGTime(string(v))
		case "isolate":
			c.isolate = string(v) == "t"
		case "status":
			status = string(v)
		}
	}
	if c.id == uuid.Nil || c.topic == "" {
		return c, false, fmt.Errorf("outbox row without id or topic")
	}
	c.holdOnly = status == "DEAD"
	return c, status == "PENDING" || c.holdOnly, nil
}

// parsePGTime reads a timestamptz in PostgreSQL's ISO output; zero if it
// cannot.
func parsePGTime(s string) time.Time {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07", "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999-07:00:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}
