package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/paysuite/payments/pkg/postgres"
)

// handoffPoll is how long the reader waits for the next message while it
// holds committed events the sender has not taken yet: the sender takes
// them as soon as it is free, and the reader looks that often.
const handoffPoll = 2 * time.Millisecond

// stream reads the slot until ctx ends or the connection fails, handing
// committed transactions to the sender and confirming what it settled.
func (r *LogicalRelay) stream(ctx context.Context) error {
	slot := r.slotName()
	cfg := r.ob.db.Config().ConnConfig.Config.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["replication"] = "database"
	// Its own name, not the pool's: synchronous_standby_names that names
	// the standbys never matches it (logical_syncrep.go).
	cfg.RuntimeParams["application_name"] = slot
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing; the slot is free either way

	dctx, dcancel := context.WithTimeout(ctx, postgres.CallTimeout)
	held, err := r.deadKeys(dctx)
	dcancel()
	if err != nil {
		return err
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: []string{
		"proto_version '1'", "publication_names '" + r.cfg.Publication + "'", "messages 'true'"}})
	if isObjectInUse(err) {
		return errSlotBusy
	}
	if err != nil {
		return fmt.Errorf("start replication on slot %s: %w", slot, err)
	}
	// The slot's position is where this stream starts: Settle must not
	// trust a position of an earlier stream, perhaps on another server
	// (before a failover), whose WAL went further.
	var start string
	qctx, qcancel := context.WithTimeout(ctx, postgres.CallTimeout)
	err = r.ob.db.QueryRow(qctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&start)
	qcancel()
	if err != nil {
		return fmt.Errorf("read the position of slot %s: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(start)
	if err != nil {
		return fmt.Errorf("read the position of slot %s: %w", slot, err)
	}
	r.acked.Store(uint64(lsn))
	r.active.Store(true)
	r.lm.Active.Set(1)
	defer func() { r.active.Store(false); r.lm.Active.Set(0); r.lm.SyncCandidate.Set(0) }()
	r.log.InfoContext(ctx, "outbox logical relay streaming", "slot", slot, "from", start)

	// Sends get a grace period after ctx ends so that a stopping relay
	// finishes the batch in hand; what it does not confirm is sent again by
	// the next relay.
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSend()
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.poll.cfg.SendTimeout, cancelSend)
	})
	defer stop()
	batches := make(chan walBatch)
	sendErr := make(chan error, 1)
	go func() { sendErr <- r.sendLoop(sendCtx, batches, held) }()

	sw := &syncWatch{r: r, pid: conn.PID(), app: slot}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go sw.run(watchCtx)

	s := &streamState{r: r, conn: conn, batches: batches, sendErr: sendErr, sync: sw,
		relations: map[uint32]*pglogrepl.RelationMessage{}}
	err = s.run(ctx)
	stopWatch()
	cancelSend()
	if serr := <-sendErr; serr != nil && err == nil && ctx.Err() == nil {
		err = serr
	}
	// What this instance held is the next stream's (or another instance's)
	// to send: it no longer counts toward this instance's lag.
	r.oldestUnconfirmed.Store(nil)
	// A last report of what was settled, so a successor resends less.
	_ = s.status(context.WithoutCancel(ctx))
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// streamState is the reader's side of one replication connection.
type streamState struct {
	r         *LogicalRelay
	conn      *pgconn.PgConn
	batches   chan<- walBatch
	sendErr   <-chan error
	sync      *syncWatch
	relations map[uint32]*pglogrepl.RelationMessage
	// cur is the transaction being decoded; pending the committed ones the
	// sender has not taken yet.
	cur        []claimed
	curTime    time.Time
	curXid     uint32
	pending    walBatch
	hasPending bool
	nextStatus time.Time
	lastData   time.Time
	// lastHeard is when the server last sent anything while the reader
	// listened: every status asks for a reply, so a live server is heard
	// every StatusInterval.
	lastHeard time.Time
}

// silentAfter is how long a server may stay silent, while the reader
// listens, before the stream counts it as hung: a stopped process's kernel
// keeps the connection open, and only the missing replies tell. Ten
// status intervals, and at least 5 s: a walsender busy decoding a large
// transaction answers late.
func (s *streamState) silentAfter() time.Duration {
	return max(10*s.r.cfg.StatusInterval, 5*time.Second)
}

func (s *streamState) run(ctx context.Context) error {
	s.nextStatus = time.Now().Add(s.r.cfg.StatusInterval)
	s.lastData = time.Now()
	s.lastHeard = time.Now()
	for ctx.Err() == nil {
		waited, err := s.handoff(ctx)
		if err != nil {
			return err
		}
		if waited {
			s.lastHeard = time.Now() // not listening meanwhile: the replies wait in the socket
		}
		if silent := time.Since(s.lastHeard); silent > s.silentAfter() {
			return fmt.Errorf("replication stream: the server sent nothing for %s, not even the replies it was asked for (hung?)", silent.Round(time.Millisecond))
		}
		if time.Now().After(s.nextStatus) {
			if err := s.status(ctx); err != nil {
				return err
			}
		}
		if time.Since(s.lastData) > s.r.cfg.Heartbeat {
			s.lastData = time.Now()
			go s.r.heartbeat(ctx)
		}
		deadline := s.nextStatus
		if s.hasPending {
			deadline = time.Now().Add(handoffPoll)
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := s.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("receive from slot: %w", err)
		}
		s.lastHeard = time.Now()
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := s.copyData(ctx, m.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(m))
		}
	}
	return nil
}

// handoff gives the committed transactions to the sender if it is free.
// Past BatchSize events it waits for it, confirming meanwhile what is
// settled (the server drops a connection that stays silent for
// wal_sender_timeout); waited says it did.
func (s *streamState) handoff(ctx context.Context) (waited bool, err error) {
	if !s.hasPending {
		return false, nil
	}
	full := len(s.pending.events) >= s.r.poll.cfg.BatchSize
	select {
	case s.batches <- s.pending:
		s.pending, s.hasPending = walBatch{}, false
		return false, nil
	case err := <-s.sendErr:
		return false, senderStopped(err)
	case <-ctx.Done():
		return false, nil
	default:
	}
	if !full {
		return false, nil
	}
	for {
		select {
		case s.batches <- s.pending:
			s.pending, s.hasPending = walBatch{}, false
			return true, nil
		case err := <-s.sendErr:
			return true, senderStopped(err)
		case <-ctx.Done():
			return true, nil
		case <-time.After(time.Until(s.nextStatus)):
			if err := s.status(ctx); err != nil {
				return true, err
			}
		}
	}
}

// senderStopped is the stream's error when the sender ended with err.
func senderStopped(err error) error {
	if err == nil {
		return errors.New("sender stopped")
	}
	return err
}

// status confirms the settled position: write, flush and apply all set to
// it, never to the server's WAL end; it asks the server for a reply. Until
// the relay knows its connection is no synchronous standby candidate, and
// while it is one, it reports position 0 instead, which confirms nothing
// and keeps the walsender out of the candidates (logical_syncrep.go).
func (s *streamState) status(ctx context.Context) error {
	s.nextStatus = time.Now().Add(s.r.cfg.StatusInterval)
	lsn := pglogrepl.LSN(s.r.acked.Load())
	if !s.sync.confirms() {
		lsn = 0
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn, ClientTime: time.Now(),
		// The server's keepalive in reply is how a hung server is told
		// from an idle one (silentAfter).
		ReplyRequested: true})
	if err != nil {
		return fmt.Errorf("confirm position %s: %w", lsn, err)
	}
	return nil
}

func (s *streamState) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		if ka.ReplyRequested {
			return s.status(ctx)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse WAL data: %w", err)
		}
		return s.decode(xld.WALData)
	}
	return nil
}

// deadKeys reads the keys held back by a DEAD event.
func (r *LogicalRelay) deadKeys(ctx context.Context) (map[topicKey]bool, error) {
	rows, err := r.ob.db.Query(ctx, `SELECT DISTINCT topic, key FROM outbox_event WHERE status = 'DEAD'`)
	if err != nil {
		return nil, fmt.Errorf("read keys held back: %w", err)
	}
	defer rows.Close()
	held := map[topicKey]bool{}
	for rows.Next() {
		var k topicKey
		if err := rows.Scan(&k.topic, &k.key); err != nil {
			return nil, err
		}
		held[k] = true
	}
	return held, rows.Err()
}

// heartbeat writes a message into the WAL: a transaction the stream carries
// even when no event commits, so the slot's position moves and the server
// can recycle WAL.
func (r *LogicalRelay) heartbeat(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.ob.db.Exec(hctx, heartbeatSQL); err != nil && ctx.Err() == nil {
		r.log.DebugContext(ctx, "outbox logical relay heartbeat failed", "err", err)
	}
}

const heartbeatSQL = `SELECT pg_logical_emit_message(true, 'paysuite_outbox', '')`
