// Package history records what the clients of a fault test did and saw,
// one operation per JSON line, and checks that history Jepsen-style: every
// transfer answered 202 reaches one terminal status and no read contradicts
// an earlier one (but one answered while a former primary of the transfers
// database ran unfenced: unfenced.go) and each read answers the accepted
// request's body, each
// Idempotency-Key behaves as a register the first accepted body wins
// (checked with porcupine), balance snapshots keep the bank invariant and
// the per-account model (every balance exactly what its deposits and the
// accepted requests with postings give, every entry's postings what was
// asked), every record a relay published was consumed in outbox order by
// every group named for its topic, and a webhook is delivered twice only
// where a crash explains it. Holds (two-phase transfers, CONTRACTS section
// 9) are checked against the same operations and their own (holds.go):
// every account's reservation within its balance and equal to its open
// holds, each hold released once, never captured beyond what it reserved,
// its status what the ledger published, a command accepted only while it
// was reserved. Refunds (CONTRACTS section 10) too (refunds.go,
// refundchecks.go): never more refunded than settled per transfer, each
// refund posted once, its status the ledger's outcome; and the client's
// history (section 11, statements.go): every account's running balances
// chaining to its balance, every statement's opening plus its postings
// its closing, one balance per account and instant. A history that tested nothing (no accepted transfer, read,
// snapshot with postings or record; a fault whose window holds none of
// what it expected; a mix with holds and no hold reserved, captured,
// cancelled or expired) is an anomaly too.
//
// A test records through a Recorder as operations happen, then reads the
// file back with ReadFile and judges it with Check:
//
//	rec, _ := history.Create(filepath.Join(logDir, "history.jsonl"))
//	start := time.Now()
//	status, id, err := post(key, body)
//	rec.Post(start, history.OK, key, body, history.Answer{Status: status, ID: id})
//	...
//	_ = rec.Close()
//	h, _ := history.ReadFile(path)
//	report, err := history.Check(h)
//	t.Log(report.Table())
//	if err != nil || !report.OK() { t.Fail() }
//
// A run with holds in its mix records besides: each POST's captura and
// expiraEm as sent (Transfer.Capture, ExpiresAt); each capture and
// cancellation with Recorder.Capture and Recorder.Cancel (the command's
// own Idempotency-Key, the transfer and the amount asked, the answer with
// the status its body names); a read's valorLiquidadoEmCentavos
// (Answer.SettledCents); in each snapshot every balance's reservado
// (Balance.ReservedCents) and the ledger's reservations (Snapshot.Holds,
// at least the open ones); the amount and motivo of each published result
// (Record.AmountCents, Reason), the reservada and cancelada topics among
// those recorded, with their consumer groups.
//
// A run with refunds or statements in its mix records its claims
// (Recorder.Mix: MixRefunds, MixStatements); each refund POST and read
// with Recorder.Refund and RefundGet (the refund's own Idempotency-Key,
// its transfer, the amount asked, the answer with the refund's body in
// Answer.Refund); a transfer read's valorEstornadoEmCentavos
// (Answer.RefundedCents); in each snapshot the refunds' entries
// (EntryRefund, with their transfer and posting rows counted) and every
// posting row with its running balance (Snapshot.Postings); the published
// refund results' estornoId, amount and motivo (Record.RefundID,
// AmountCents, Reason); statements and balances at an instant with
// Recorder.Statement and BalanceAt.
//
// An operation whose outcome the client did not learn (a timeout, a reset
// connection) is recorded with Outcome Info: it may or may not have taken
// effect, and every check allows both. A Fail is a definite refusal that
// changed nothing (a 409, or a 503 overloaded, of the transfers API):
// checks ignore it.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Kind is the kind of an operation in a history.
type Kind string

// The operation kinds.
const (
	KindPost      Kind = "post"      // POST /transferencias
	KindGet       Kind = "get"       // GET /transferencias/{id}
	KindDeposit   Kind = "deposit"   // POST /contas/{id}/depositos
	KindSnapshot  Kind = "snapshot"  // every balance and posting, read in one REPEATABLE READ transaction
	KindPublished Kind = "published" // a record a relay marked published
	KindConsumed  Kind = "consumed"  // a record a consumer group consumed
	// KindSubscribed names a consumer group that must consume a topic
	// (Record's Topic and Group): every record published on the topic
	// must be among that group's consumed ones.
	KindSubscribed Kind = "subscribed"
	KindWebhook    Kind = "webhook" // a webhook the receiver accepted
	KindCrash      Kind = "crash"   // a fault injected by the test
	KindCapture    Kind = "capture" // POST /transferencias/{id}/captura
	KindCancel     Kind = "cancel"  // POST /transferencias/{id}/cancelamento
	// The kinds of refunds and of the client's history (CONTRACTS
	// sections 10 and 11).
	KindRefund    Kind = "refund"     // POST /transferencias/{id}/estornos
	KindRefundGet Kind = "refund-get" // GET /transferencias/{id}/estornos/{estornoId}
	KindStatement Kind = "statement"  // GET /contas/{id}/extrato
	KindBalanceAt Kind = "balance-at" // GET /contas/{id}/saldo?em=
	// KindMix names an operation the run's mix claims to exercise (Key:
	// MixRefunds, MixStatements): a claim the history then has to bear
	// out (checkMinimums).
	KindMix Kind = "mix"
)

// The claims of a run's mix (KindMix).
const (
	MixRefunds    = "refunds"    // refunds of settled transfers
	MixStatements = "statements" // running balances in the snapshots, statements and balances at an instant
)

// Outcome is what the client learnt of an operation.
type Outcome string

// The outcomes, as Jepsen names them.
const (
	OK   Outcome = "ok"   // it happened, with the answer recorded
	Fail Outcome = "fail" // it was refused and changed nothing
	Info Outcome = "info" // unknown: it may or may not have happened
)

// Transfer is the body of POST /transferencias.
type Transfer struct {
	From        string `json:"contaOrigem"`
	To          string `json:"contaDestino"`
	AmountCents int64  `json:"valorEmCentavos"`
	Currency    string `json:"moeda"`
	// Capture is CaptureManual for a hold; empty (or "AUTOMATICA") is an
	// immediate transfer.
	Capture string `json:"captura,omitempty"`
	// ExpiresAt is a hold's expiraEm as sent (RFC 3339), empty for the
	// default.
	ExpiresAt string `json:"expiraEm,omitempty"`
}

// The values of a transfer's captura.
const (
	CaptureAutomatic = "AUTOMATICA"
	CaptureManual    = "MANUAL"
)

// Hold reports a request for a hold.
func (t Transfer) Hold() bool { return t.Capture == CaptureManual }

// Command is the transfer a capture or cancellation is for and, for a
// capture, the amount it asked (0: all that is reserved).
type Command struct {
	TransferID  string `json:"transferId"`
	AmountCents int64  `json:"valorEmCentavos,omitempty"`
}

// Answer is what an HTTP operation was told.
type Answer struct {
	Status         int    `json:"status,omitempty"`         // HTTP status code
	ID             string `json:"id,omitempty"`             // the transfer id in the answer's body
	TransferStatus string `json:"transferStatus,omitempty"` // the body's status (GET)
	Problem        string `json:"problem,omitempty"`        // the problem+json type URI of an error
	Error          string `json:"error,omitempty"`          // the client's error when the outcome is unknown
	// Transfer is what a GET answered 200 said the transfer is (its
	// accounts, amount and currency), compared with the accepted request.
	Transfer *Transfer `json:"transfer,omitempty"`
	// SettledCents is a GET's valorLiquidadoEmCentavos: what a captured
	// hold moved.
	SettledCents int64 `json:"settledCents,omitempty"`
	// RefundedCents is a GET's valorEstornadoEmCentavos: the sum of the
	// transfer's settled refunds.
	RefundedCents int64 `json:"refundedCents,omitempty"`
	// Refund is the refund a refund's 202 or 200 names.
	Refund *RefundState `json:"refund,omitempty"`
}

// Deposit is a deposit into a customer account.
type Deposit struct {
	Account     string `json:"account"`
	Currency    string `json:"currency"`
	AmountCents int64  `json:"amountCents"`
}

// Balance is one account's balance in a snapshot.
type Balance struct {
	Account  string `json:"account"`
	Currency string `json:"currency"`
	Funding  bool   `json:"funding,omitempty"` // the ledger's funding account of its currency
	Cents    int64  `json:"cents"`
	// ReservedCents is the account's reservadoEmCentavos.
	ReservedCents int64 `json:"reservedCents,omitempty"`
}

// The entry types of the ledger's postings.
const (
	EntryTransfer = "TRANSFER"
	EntryDeposit  = "DEPOSIT"
	EntryRefund   = "REFUND"
)

// Entry is one ledger entry's postings: a transfer's, a deposit's or a
// refund's debit and credit. The ledger keeps at most one posting per side
// of an entry; a side without its posting has an empty account and 0
// cents. A refund debits the refunded transfer's destination and credits
// its source.
type Entry struct {
	Type        string `json:"type"` // EntryTransfer, EntryDeposit or EntryRefund
	ID          string `json:"id"`   // the transfer id, the deposit id or the refund id
	Debit       string `json:"debit,omitempty"`
	DebitCents  int64  `json:"debitCents,omitempty"`
	Credit      string `json:"credit,omitempty"`
	CreditCents int64  `json:"creditCents,omitempty"`
	// TransferID is the transfer a refund's entry refunds.
	TransferID string `json:"transferId,omitempty"`
	// Postings is the number of posting rows of the entry where the
	// snapshot counts them (2; 0 when not counted). The sides' cents are
	// then the sums of their rows: an entry posted twice shows 4 rows and
	// twice the amount.
	Postings int `json:"postings,omitempty"`
}

// Posting is one posting row with the running balance the ledger keeps on
// it (saldoAposEmCentavos): Seq orders an account's postings (the ledger
// inserts them under the account's lock, so it is their commit order),
// Cents is signed (a credit adds, a debit takes), After is the account's
// balance after it.
type Posting struct {
	Account string `json:"account"`
	Seq     int64  `json:"seq"`
	Entry   string `json:"entry"` // the entry's id: the transfer, deposit or refund
	Cents   int64  `json:"cents"`
	After   int64  `json:"after"`
}

// Hold is one reservation the ledger keeps: the hold's transfer, the
// account it reserves on, the amount, and its state named as the
// transfer's status (RESERVADA while open; LIQUIDADA, CANCELADA or
// EXPIRADA once released).
type Hold struct {
	TransferID  string `json:"transferId"`
	Account     string `json:"account"`
	AmountCents int64  `json:"amountCents"`
	State       string `json:"state"`
	// CapturedCents is what a LIQUIDADA hold captured.
	CapturedCents int64 `json:"capturedCents,omitempty"`
}

// Snapshot is every account's balance, every entry's postings and every
// reservation, all read in one REPEATABLE READ transaction; with running
// balances (a ledger that keeps them), every posting row with its own.
type Snapshot struct {
	Balances []Balance `json:"balances"`
	Entries  []Entry   `json:"entries"`
	Holds    []Hold    `json:"holds,omitempty"`
	Postings []Posting `json:"postings,omitempty"`
}

// TransferIDs returns the ids of the transfers with postings.
func (s Snapshot) TransferIDs() []string { return s.ids(EntryTransfer) }

// DepositIDs returns the ids of the deposits with postings.
func (s Snapshot) DepositIDs() []string { return s.ids(EntryDeposit) }

func (s Snapshot) ids(typ string) []string {
	var out []string
	for _, e := range s.Entries {
		if e.Type == typ {
			out = append(out, e.ID)
		}
	}
	return out
}

// Record is one Kafka record, as a relay published it (with its outbox
// row's order) or as a consumer group consumed it.
type Record struct {
	Topic      string `json:"topic"`
	Partition  int    `json:"partition"`
	Offset     int64  `json:"offset"`     // consumed records: the offset read
	Key        string `json:"key"`        // the account the record is keyed by
	EventID    string `json:"eventId"`    // evento-id
	EventType  string `json:"eventType"`  // evento-tipo
	TransferID string `json:"transferId"` // the transfer the event is about
	Source     string `json:"source"`     // published: the outbox (service) that wrote it
	Seq        int64  `json:"seq"`        // published: the outbox row's seq, per Source
	// Ordered (published): the producer serialises this key's events (it
	// locks the account, or handles a partition one record at a time), so
	// their seq order is their commit order, the order the outbox keeps.
	// Events of concurrent transactions have no order between them.
	Ordered bool   `json:"ordered,omitempty"`
	Group   string `json:"group,omitempty"` // consumed: the consumer group
	// AmountCents (published) is a TransferenciaLiquidada's valorEmCentavos
	// (what a capture moved) or a TransferenciaReservada's.
	AmountCents int64 `json:"amountCents,omitempty"`
	// Reason (published) is a TransferenciaCancelada's or
	// TransferenciaRejeitada's motivo, or an EstornoRejeitado's.
	Reason string `json:"reason,omitempty"`
	// RefundID (published) is a refund result's estornoId; AmountCents is
	// then an EstornoLiquidado's valorEmCentavos.
	RefundID string `json:"refundId,omitempty"`
}

// Webhook is a webhook delivery the receiver accepted.
type Webhook struct {
	EventID    string `json:"eventId"`
	TransferID string `json:"transferId,omitempty"`
}

// Crash is a fault the test injected: from At (the Op's Invoke) to its end
// (the Op's Complete) the named process or its database was down.
type Crash struct {
	Name string `json:"name"`
	// InterruptsWebhooks: the fault can stop the webhook sender between a
	// delivery and its record (a kill of the sender, a crash of its
	// database), so that it delivers that event again.
	InterruptsWebhooks bool `json:"interruptsWebhooks,omitempty"`
	// Expect is what the history must show inside the fault's window: a
	// fault the clients never saw tested nothing.
	Expect Expect `json:"expect,omitzero"`
}

// Expect lists what a fault's window (from its Invoke to its Complete)
// must hold, each where the fault makes it possible; a missing one is a
// Vacuous anomaly.
type Expect struct {
	Snapshots    bool `json:"snapshots,omitempty"`    // a snapshot begun inside the window
	Reads        bool `json:"reads,omitempty"`        // a GET invoked inside it and answered 200 or 404
	UnknownPosts bool `json:"unknownPosts,omitempty"` // a POST invoked inside it whose outcome is unknown
	// WritesInFlight: a POST invoked before the fault began that
	// completed after it (a write the fault cut into).
	WritesInFlight bool `json:"writesInFlight,omitempty"`
}

// Op is one line of a history: an operation, its times and its outcome.
// Exactly one of the pointer fields is set, the one of its Kind.
type Op struct {
	Kind     Kind      `json:"kind"`
	Invoke   time.Time `json:"invoke"`
	Complete time.Time `json:"complete"`
	Outcome  Outcome   `json:"outcome"`
	// Key is the Idempotency-Key of a post, deposit, capture, cancel or
	// refund, the id a get or refund-get read, the account of a
	// statement or balance-at, the claim of a mix.
	Key      string    `json:"key,omitempty"`
	Command  *Command  `json:"command,omitempty"` // capture, cancel
	Transfer *Transfer `json:"transfer,omitempty"`
	Answer   *Answer   `json:"answer,omitempty"`
	Deposit  *Deposit  `json:"deposit,omitempty"`
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	Record   *Record   `json:"record,omitempty"`
	Webhook  *Webhook  `json:"webhook,omitempty"`
	Unfenced *Unfenced `json:"unfenced,omitempty"`
	Crash    *Crash    `json:"crash,omitempty"`
	// Refund is the transfer a refund or a refund's read is about (Key is
	// the refund's id, its Idempotency-Key).
	Refund    *Refund    `json:"refund,omitempty"`
	Statement *Statement `json:"statement,omitempty"`
	BalanceAt *BalanceAt `json:"balanceAt,omitempty"`
}

// History is the operations of a run, in the order they were recorded.
type History []Op

// Read decodes a history from JSON lines.
func Read(r io.Reader) (History, error) {
	var h History
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		h = append(h, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return h, nil
}

// ReadFile reads the history a Recorder wrote to path.
func ReadFile(path string) (History, error) {
	f, err := os.Open(path) //nolint:gosec // the test's own file
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return Read(f)
}
