package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"time"
)

// Recorder writes a history as JSON lines as operations happen. It is safe
// for concurrent use. Each method takes the time the operation was invoked
// and records its completion as the time of the call, so a client calls it
// right after it learnt the outcome. A write error is kept and returned by
// Close (and Err): a test records on its hot path and checks once.
type Recorder struct {
	mu     sync.Mutex
	buf    *bufio.Writer
	enc    *json.Encoder
	c      io.Closer
	err    error
	n      int
	closed bool
	now    func() time.Time
}

// NewRecorder records to w.
func NewRecorder(w io.Writer) *Recorder {
	r := &Recorder{buf: bufio.NewWriterSize(w, 1<<16), now: time.Now}
	r.enc = json.NewEncoder(r.buf)
	return r
}

// Create records to a new file at path.
func Create(path string) (*Recorder, error) {
	f, err := os.Create(path) //nolint:gosec // the test's own file
	if err != nil {
		return nil, err
	}
	r := NewRecorder(f)
	r.c = f
	return r, nil
}

// Record writes op as it is (nothing once closed). The methods below
// build it for each kind.
func (r *Recorder) Record(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil || r.closed {
		return
	}
	r.err = r.enc.Encode(op)
	r.n++
}

// Len returns how many operations were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Err returns the first write error.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Flush writes what is buffered.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.buf.Flush()
	}
	return r.err
}

// Close flushes and closes the file; it returns the first write error.
// What is recorded after Close is dropped: the history a checker read is
// the whole history. Closing again does nothing.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.err
	}
	r.closed = true
	if r.err == nil {
		r.err = r.buf.Flush()
	}
	if r.c != nil {
		r.err = errors.Join(r.err, r.c.Close())
	}
	return r.err
}

func (r *Recorder) op(kind Kind, invoke time.Time, outcome Outcome) Op {
	return Op{Kind: kind, Invoke: invoke, Complete: r.now(), Outcome: outcome}
}

// Post records a POST /transferencias under key with body: outcome OK with
// the answer's status (202, or a final 4xx), Fail for an answer that
// wrote nothing (409 in progress, 503 overloaded), Info when no answer
// came or the answer leaves it open (503 service-unavailable: a commit cut
// off while it waited for a synchronous standby stands on the primary).
func (r *Recorder) Post(invoke time.Time, outcome Outcome, key string, body Transfer, ans Answer) {
	op := r.op(KindPost, invoke, outcome)
	op.Key, op.Transfer, op.Answer = key, &body, &ans
	r.Record(op)
}

// Get records a GET /transferencias/{id}: outcome OK with status 200 and
// the transfer's status, or 404; Fail or Info otherwise.
func (r *Recorder) Get(invoke time.Time, outcome Outcome, id string, ans Answer) {
	op := r.op(KindGet, invoke, outcome)
	op.Key, op.Answer = id, &ans
	r.Record(op)
}

// Deposit records a deposit made under key.
func (r *Recorder) Deposit(invoke time.Time, outcome Outcome, key string, d Deposit) {
	op := r.op(KindDeposit, invoke, outcome)
	op.Key, op.Deposit = key, &d
	r.Record(op)
}

// Snapshot records a balance snapshot whose transaction began at invoke.
func (r *Recorder) Snapshot(invoke time.Time, s Snapshot) {
	op := r.op(KindSnapshot, invoke, OK)
	op.Snapshot = &s
	r.Record(op)
}

// Published records a record a relay marked published.
func (r *Recorder) Published(rec Record) {
	op := r.op(KindPublished, r.now(), OK)
	op.Record = &rec
	r.Record(op)
}

// Consumed records a record consumed by rec.Group.
func (r *Recorder) Consumed(rec Record) {
	op := r.op(KindConsumed, r.now(), OK)
	op.Record = &rec
	r.Record(op)
}

// Subscribed records that group must consume every record published on
// topic.
func (r *Recorder) Subscribed(group, topic string) {
	op := r.op(KindSubscribed, r.now(), OK)
	op.Record = &Record{Topic: topic, Group: group}
	r.Record(op)
}

// Webhook records a delivery the receiver accepted at.
func (r *Recorder) Webhook(at time.Time, w Webhook) {
	r.Record(Op{Kind: KindWebhook, Invoke: at, Complete: at, Outcome: OK, Webhook: &w})
}

// Crash records a fault that began at from and ended at to (the process
// or database back).
func (r *Recorder) Crash(from, to time.Time, c Crash) {
	r.Record(Op{Kind: KindCrash, Invoke: from, Complete: to, Outcome: Info, Crash: &c})
}

// Capture records a POST /transferencias/{id}/captura under key (the
// command's Idempotency-Key) for c.TransferID, asking c.AmountCents (0:
// all of it): outcome OK with the answer's status (202 with the status in
// its body, or a final 4xx such as 409 transfer-not-reserved or 422), Fail
// for an answer that wrote nothing (409 command-in-progress, 503
// overloaded), Info when the outcome is unknown, as for Post.
func (r *Recorder) Capture(invoke time.Time, outcome Outcome, key string, c Command, ans Answer) {
	r.command(KindCapture, invoke, outcome, key, c, ans)
}

// Cancel records a POST /transferencias/{id}/cancelamento under key for
// c.TransferID, with the outcomes of Capture.
func (r *Recorder) Cancel(invoke time.Time, outcome Outcome, key string, c Command, ans Answer) {
	r.command(KindCancel, invoke, outcome, key, c, ans)
}

func (r *Recorder) command(kind Kind, invoke time.Time, outcome Outcome, key string, c Command, ans Answer) {
	op := r.op(kind, invoke, outcome)
	op.Key, op.Command, op.Answer = key, &c, &ans
	r.Record(op)
}

// Refund records a POST /transferencias/{id}/estornos under key (the
// refund's Idempotency-Key, its id) for r.TransferID asking r.AmountCents
// (0: all that remains): outcome OK with the answer's status (202 with
// the refund's body, or a final 404, 409 transfer-not-settled, 422), Fail
// for an answer that wrote nothing (409 in progress, 503 overloaded),
// Info when the outcome is unknown, as for Post.
func (r *Recorder) Refund(invoke time.Time, outcome Outcome, key string, rf Refund, ans Answer) {
	op := r.op(KindRefund, invoke, outcome)
	op.Key, op.Refund, op.Answer = key, &rf, &ans
	r.Record(op)
}

// RefundGet records a GET /transferencias/{id}/estornos/{key}: outcome OK
// with status 200 and the refund's body (Answer.Refund), or 404; Fail or
// Info otherwise.
func (r *Recorder) RefundGet(invoke time.Time, outcome Outcome, key string, rf Refund, ans Answer) {
	op := r.op(KindRefundGet, invoke, outcome)
	op.Key, op.Refund, op.Answer = key, &rf, &ans
	r.Record(op)
}

// Statement records a GET /contas/{id}/extrato of s.Account for s.From
// to s.To, and what a 200 said.
func (r *Recorder) Statement(invoke time.Time, outcome Outcome, s Statement, ans Answer) {
	op := r.op(KindStatement, invoke, outcome)
	op.Key, op.Statement, op.Answer = s.Account, &s, &ans
	r.Record(op)
}

// BalanceAt records a GET /contas/{id}/saldo?em= and what a 200 said.
func (r *Recorder) BalanceAt(invoke time.Time, outcome Outcome, b BalanceAt, ans Answer) {
	op := r.op(KindBalanceAt, invoke, outcome)
	op.Key, op.BalanceAt, op.Answer = b.Account, &b, &ans
	r.Record(op)
}

// Mix records that the run's mix claims what (MixRefunds,
// MixStatements): the history must then show it (checkMinimums).
func (r *Recorder) Mix(what string) {
	op := r.op(KindMix, r.now(), OK)
	op.Key = what
	r.Record(op)
}
