package outbox

import (
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/google/uuid"
)

// RelayConfig tunes a relay. A zero or negative field takes its default
// (DefaultRelayConfig).
type RelayConfig struct {
	// Name identifies this relay in logs and in locked_by, where each claim
	// adds its own number ("<name>/<n>"); default host-pid-random.
	Name string
	// BatchSize is how many events one claim takes, and so the records of
	// one Publish call.
	BatchSize int `env:"OUTBOX_BATCH_SIZE" help:"events claimed per relay batch"`
	// Workers is how many claim-send-mark loops run at once.
	Workers int `env:"OUTBOX_WORKERS" help:"claim-send-mark loops per relay"`
	// Lease is the longest a claim is owned by a live relay before another
	// relay may reclaim it. A dead relay's claims are free at once (see
	// liveness.go), so the lease only bounds a relay that is alive but
	// stuck. The relay never sends past its lease: the sends of a batch
	// stop LeaseMargin before it ends, and what is left goes back to the
	// queue. It must be at least SendTimeout + LeaseMargin + 1s (Validate).
	Lease time.Duration `env:"OUTBOX_LEASE" help:"longest a claimed batch belongs to a live relay; at least OUTBOX_SEND_TIMEOUT + 2s"`
	// SendTimeout bounds one publish call.
	SendTimeout time.Duration `env:"OUTBOX_SEND_TIMEOUT" help:"bound of one broker call of the relay"`
	// PollInterval is the fallback scan when no wake-up arrives, and so the
	// longest a dead relay's claims wait to be taken over.
	PollInterval time.Duration `env:"OUTBOX_POLL_INTERVAL" help:"fallback scan when no wake-up arrives"`
	// Gather is how long an idle worker of the polling relay waits after a
	// wake-up before it claims, so that the events committed meanwhile go
	// in the same claim, publish and mark; default 0: it claims at once.
	// Larger, a trickle costs fewer round trips per event, and each event
	// waits up to Gather more (docs/figures.md, "Batching at a trickle").
	Gather time.Duration `env:"OUTBOX_GATHER" help:"wait of the polling relay after a wake-up before it claims; above 0 it trades latency for fewer round trips at low rates"`
	// MaxAttempts is how many times the broker may refuse an event itself
	// (too large, corrupt, invalid: see Refused) before it turns DEAD.
	// Other failures (broker unreachable, leader moving, authorization,
	// unknown topic) are retried with the backoff for as long as they last
	// and never count toward DEAD: an outage never kills events, it shows
	// as the age of the oldest pending event and as
	// outbox_send_failures_total{cause}. Events that failed because the
	// broker could not be reached are due again as soon as the broker takes
	// a send (waiting.go).
	MaxAttempts int `env:"OUTBOX_MAX_ATTEMPTS" help:"broker refusals of an event before it goes DEAD"`
	// BackoffBase and BackoffMax shape the exponential retry delay (with
	// jitter).
	BackoffBase time.Duration `env:"OUTBOX_BACKOFF_BASE" help:"first retry delay, doubled per attempt, with jitter"`
	BackoffMax  time.Duration `env:"OUTBOX_BACKOFF_MAX" help:"retry delay cap"`
	// Retention is how long PUBLISHED rows are kept.
	Retention time.Duration `env:"OUTBOX_RETENTION" help:"how long PUBLISHED rows are kept"`
	// CleanupInterval and CleanupBatch pace the deletion of old published
	// rows: how often, and how many rows per statement.
	CleanupInterval time.Duration
	CleanupBatch    int
	// StatsInterval is how often the gauges are refreshed.
	StatsInterval time.Duration
	// DisableListen turns off LISTEN (cross-process wake-ups).
	DisableListen bool
}

// DefaultBatchSize is RelayConfig.BatchSize's default.
const DefaultBatchSize = 500

// DefaultRelayConfig is a relay's configuration when nothing is set (but
// its Name): what the OUTBOX_* variables default to.
func DefaultRelayConfig() RelayConfig { return RelayConfig{}.withDefaultValues() }

// withDefaults is c with a Name made up when it has none, and every zero or
// negative field set to its default.
func (c RelayConfig) withDefaults() RelayConfig {
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	return c.withDefaultValues()
}

// withDefaultValues is c with every zero or negative field set to its
// default: the one declaration of RelayConfig's defaults.
func (c RelayConfig) withDefaultValues() RelayConfig {
	setDefault(&c.BatchSize, DefaultBatchSize)
	setDefault(&c.Workers, 2)
	setDefault(&c.MaxAttempts, 12)
	setDefault(&c.CleanupBatch, 1000)
	setDefault(&c.Lease, 30*time.Second)
	setDefault(&c.SendTimeout, 15*time.Second)
	setDefault(&c.PollInterval, 500*time.Millisecond)
	setDefault(&c.BackoffBase, 500*time.Millisecond)
	setDefault(&c.BackoffMax, time.Minute)
	setDefault(&c.Retention, 7*24*time.Hour)
	setDefault(&c.CleanupInterval, time.Minute)
	setDefault(&c.StatsInterval, 2*time.Second)
	return c
}

// setDefault sets *v to d when *v is zero or negative: the rule of every
// numeric field of RelayConfig and LogicalConfig.
func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// LeaseMargin is how long before its lease ends a relay stops sending the
// batch: room for the last send to be cut off and for the marks.
const LeaseMargin = time.Second

// Validate reports a configuration under which a relay could still be
// sending when its lease ends, so that another relay would send the same
// events again, possibly ahead of the older ones of their key, or one that
// gathers no shorter than its fallback poll. Services refuse to start with
// it. Zero values are read as their defaults.
func (c RelayConfig) Validate() error {
	d := c.withDefaults()
	if min := d.SendTimeout + LeaseMargin + time.Second; d.Lease < min {
		return fmt.Errorf("outbox relay: lease %v must be at least the send timeout %v + %v (OUTBOX_LEASE >= OUTBOX_SEND_TIMEOUT + %v)",
			d.Lease, d.SendTimeout, LeaseMargin+time.Second, LeaseMargin+time.Second)
	}
	if d.Gather >= d.PollInterval {
		return fmt.Errorf("outbox relay: gather %v must be below the poll interval %v (OUTBOX_GATHER < OUTBOX_POLL_INTERVAL): the fallback poll would claim first",
			d.Gather, d.PollInterval)
	}
	if d.BackoffBase > d.BackoffMax {
		return fmt.Errorf("outbox relay: backoff base %v exceeds backoff max %v", d.BackoffBase, d.BackoffMax)
	}
	return nil
}

// LogicalConfig tunes the logical relay. An empty, zero or negative field
// takes its default (DefaultLogicalConfig).
type LogicalConfig struct {
	// Slot is the replication slot's name (DefaultSlot by default). One
	// per database: every service has a database of its own.
	Slot string `env:"OUTBOX_LOGICAL_SLOT" help:"logical replication slot of the logical relay"`
	// Publication is the publication on outbox_event.
	Publication string `env:"OUTBOX_LOGICAL_PUBLICATION" help:"publication on outbox_event read by the logical relay"`
	// StatusInterval is how often the relay reports its position to the
	// server (and so how far behind confirmed_flush_lsn may be). It must be
	// well under the server's wal_sender_timeout.
	StatusInterval time.Duration `env:"OUTBOX_LOGICAL_STATUS_INTERVAL" help:"how often the logical relay confirms its position"`
	// Heartbeat is how often an idle relay writes a heartbeat message into
	// the WAL so that its slot advances.
	Heartbeat time.Duration `env:"OUTBOX_LOGICAL_HEARTBEAT" help:"heartbeat of an idle logical relay, so its slot releases WAL"`
	// SettleInterval is how often published rows are marked PUBLISHED in
	// the table, in one statement. Each settle's statement writes every
	// row published since the last one, and the stream then decodes that
	// write: the shorter the interval, the smaller each burst in front of
	// newer commits.
	SettleInterval time.Duration `env:"OUTBOX_LOGICAL_SETTLE_INTERVAL" help:"how often the logical relay marks the rows it published"`
	// RefusalAttempts is how many times an event the broker refuses (too
	// large, unknown topic, missing ACL) is tried before it turns DEAD.
	// The stream waits meanwhile, so it is small.
	RefusalAttempts int `env:"OUTBOX_LOGICAL_REFUSAL_ATTEMPTS" help:"tries of an event the broker refuses before the logical relay sets it DEAD"`
	// TakeoverRetry is how often a standby instance tries to take the slot
	// over.
	TakeoverRetry time.Duration `env:"OUTBOX_LOGICAL_TAKEOVER_RETRY" help:"how often a waiting logical relay tries to take the slot"`
}

// DefaultSlot is the default name of the logical relay's slot and
// publication; a slot of that name is made per database (SlotFor).
const DefaultSlot = "paysuite_outbox"

// DefaultLogicalConfig is the logical relay's configuration when nothing
// is set: what the OUTBOX_LOGICAL_* variables default to.
func DefaultLogicalConfig() LogicalConfig { return LogicalConfig{}.withDefaults() }

// withDefaults is c with every empty, zero or negative field set to its
// default: the one declaration of LogicalConfig's defaults.
func (c LogicalConfig) withDefaults() LogicalConfig {
	if c.Slot == "" {
		c.Slot = DefaultSlot
	}
	if c.Publication == "" {
		c.Publication = DefaultSlot
	}
	setDefault(&c.StatusInterval, time.Second)
	setDefault(&c.Heartbeat, 10*time.Second)
	setDefault(&c.SettleInterval, time.Second)
	setDefault(&c.TakeoverRetry, 250*time.Millisecond)
	setDefault(&c.RefusalAttempts, 3)
	return c
}

var identifierRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Validate reports a slot or publication name PostgreSQL would not take
// as a plain identifier.
func (c LogicalConfig) Validate() error {
	d := c.withDefaults()
	for _, n := range []string{d.Slot, d.Publication} {
		if !identifierRE.MatchString(n) {
			return fmt.Errorf("outbox logical relay: %q is not a valid slot or publication name (lower case letters, digits, _)", n)
		}
	}
	return nil
}
