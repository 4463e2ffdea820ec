package outbox

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/postgres"
)

// Relay publishes committed outbox events. Any number of relays, in one
// process or many, may run against one database.
type Relay struct {
	ob      *Outbox
	pub     broker.Publisher
	cfg     RelayConfig
	log     *slog.Logger
	metrics *Metrics
	live    *liveness
	// claims numbers this relay's claims; each claim's lease is
	// "<name>/<n>", so that no two claims, even of one relay, share one.
	claims atomic.Uint64
	// running is set by Run: claims then need the liveness session.
	running atomic.Bool
	// wait tells whether events of this relay wait for the broker to be
	// reachable again (waiting.go).
	wait waitState
	// wake holds the wake-ups of the workers, one per worker at most: each
	// wake-up sends one idle worker to claim (wakeOne).
	wake chan struct{}
	// news counts the signals that rows may have become claimable: a
	// commit of this relay's Outbox, another process's NOTIFY, the broker
	// probe, a poll skipped while a batch was in flight (signal).
	news atomic.Uint64
}

// NewRelay returns a relay publishing ob's events through pub. metrics may be
// nil. Run refuses a configuration that Validate refuses.
func NewRelay(ob *Outbox, pub broker.Publisher, cfg RelayConfig, log *slog.Logger, metrics *Metrics) *Relay {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	cfg = cfg.withDefaults()
	return &Relay{ob: ob, pub: pub, cfg: cfg, log: log, metrics: metrics,
		live: newLiveness(ob.db.Config().ConnConfig, log, cfg.Name),
		wake: make(chan struct{}, cfg.Workers)}
}

// Name returns the relay's lease owner name.
func (r *Relay) Name() string { return r.cfg.Name }

// Run publishes until ctx is cancelled, then lets the batches in hand finish
// and returns nil. It also runs the NOTIFY listener and sender, the cleanup
// of old published rows, the gauges and the broker probe (waiting.go).
func (r *Relay) Run(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return err
	}
	r.running.Store(true)
	var wg sync.WaitGroup
	local, unsubscribe := r.ob.subscribe()
	defer unsubscribe()
	// Work loops get a context that outlives ctx by the time a batch needs
	// to finish: a cancelled relay still marks what it sent.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	go func() {
		<-ctx.Done()
		// Give the batches in flight their send timeout, then stop them.
		t := time.NewTimer(r.cfg.SendTimeout + 5*time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork()
		case <-workCtx.Done():
		}
	}()

	// The liveness session outlives ctx like the batches: it is released
	// once the last batch is marked.
	var liveDone sync.WaitGroup
	liveDone.Add(1)
	go func() { defer liveDone.Done(); r.live.run(workCtx) }()
	defer liveDone.Wait()

	wg.Add(1)
	go func() { defer wg.Done(); r.wakeLoop(ctx, local) }()
	if !r.cfg.DisableListen {
		wg.Add(2)
		go func() { defer wg.Done(); r.listenLoop(ctx) }()
		go func() { defer wg.Done(); r.notifyLoop(ctx) }()
	}
	r.wait.failed() // events a previous process left waiting are probed at once
	wg.Add(3)
	go func() { defer wg.Done(); r.cleanupLoop(ctx) }()
	go func() { defer wg.Done(); r.statsLoop(ctx) }()
	go func() { defer wg.Done(); r.probeLoop(ctx) }()

	var workers sync.WaitGroup
	var busy atomic.Int32 // workers with a batch in flight
	var gathering atomic.Bool
	for i := 0; i < r.cfg.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r.workLoop(ctx, workCtx, &busy, &gathering)
		}()
	}
	workers.Wait()
	cancelWork()
	wg.Wait()
	return nil
}

// workLoop claims and publishes batches while there is work, and otherwise
// waits for a wake-up or the poll interval. Each commit wakes one worker: one
// claim takes every event that is ready. A worker that finished a batch
// wakes one worker (itself, or another that is idle) if a signal came while
// the batch was in flight: the keys it held are free, and their later
// events, committed meanwhile, may have been skipped by a claim of another
// worker. Without a signal no such event exists (the claim saw every row
// committed before it began), and a claim would find nothing. A poll that
// comes while another worker of this relay has a batch in flight is skipped
// for the same reason and counted as a signal: that worker's wake-up
// follows, and a claim now would mostly scan events of the keys it holds
// (and hold up the claims of every relay while it does).
//
// With a Gather, a worker woken from idle waits that long before it claims
// (gathering is set meanwhile), and a wake-up that comes to another worker
// then is left to it: its claim begins after that signal's commit.
func (r *Relay) workLoop(ctx, workCtx context.Context, busy *atomic.Int32, gathering *atomic.Bool) {
	poll := time.NewTimer(r.cfg.PollInterval)
	defer poll.Stop()
	select { // claims wait for the liveness session
	case <-ctx.Done():
		return
	case <-r.live.up:
	}
	woken := false
	for ctx.Err() == nil {
		if woken && r.cfg.Gather > 0 {
			gathering.Store(true)
			r.gather(ctx)
			gathering.Store(false)
		}
		woken = false
		seen := r.news.Load()
		busy.Add(1)
		n, err := r.PublishBatch(workCtx)
		busy.Add(-1)
		if err != nil && workCtx.Err() == nil {
			r.log.WarnContext(ctx, "outbox relay batch failed", "relay", r.cfg.Name, "err", err)
		}
		if n > 0 && r.cfg.Workers > 1 && r.news.Load() != seen {
			r.wakeOne()
		}
		if err == nil && n == r.cfg.BatchSize {
			continue // a full batch: more is probably waiting
		}
	wait:
		for {
			if !poll.Stop() {
				select {
				case <-poll.C:
				default:
				}
			}
			poll.Reset(r.jitter(r.cfg.PollInterval))
			select {
			case <-ctx.Done():
			case <-r.wake:
				if gathering.Load() {
					continue wait // the gathering worker's claim covers it
				}
				woken = true
			case <-poll.C:
				if busy.Load() > 0 {
					r.news.Add(1) // the busy worker's batch end claims instead
					continue wait
				}
			}
			break
		}
	}
}

// gather waits cfg.Gather, or until ctx ends.
func (r *Relay) gather(ctx context.Context) {
	t := time.NewTimer(r.cfg.Gather)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (r *Relay) jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// signal tells the relay that rows may have become claimable, and wakes a
// worker for them.
func (r *Relay) signal() {
	r.news.Add(1)
	r.wakeOne()
}

// wakeOne sends one idle worker to claim, or the next worker to finish its
// batch when none is idle. It never blocks: a wake-up left for each worker
// already covers this one.
func (r *Relay) wakeOne() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// wakeLoop wakes a worker after each burst of commits of this process.
func (r *Relay) wakeLoop(ctx context.Context, local <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-local:
			r.signal()
		}
	}
}

// notifyLoop sends one NOTIFY for each burst of local commits, after the
// commit and outside the business transaction: a NOTIFY inside it would take
// a database-wide lock at commit and serialise every commit. Its payload
// names the Outbox, whose relays skip it.
func (r *Relay) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ob.notify:
			nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := r.ob.db.Exec(nctx, "SELECT pg_notify($1, $2)", r.ob.channel, r.ob.id)
			cancel()
			if err != nil && ctx.Err() == nil {
				r.log.DebugContext(ctx, "outbox notify failed", "err", err)
			}
		}
	}
}

// listenLoop wakes a worker on each NOTIFY of another Outbox (another
// process, as a rule); those of this relay's Outbox are skipped, since its
// commits woke the relay directly. A lost connection is re-established;
// meanwhile polling covers.
func (r *Relay) listenLoop(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.DebugContext(ctx, "outbox listen connection lost", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.jitter(2 * time.Second)):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	// A connection of its own, outside the pool: a listener holds its
	// connection for as long as it runs. The connect and the LISTEN are
	// bounded (postgres.CallTimeout); the wait for a notification is not
	// (polling covers a listener stuck on a hung server).
	lctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(lctx, r.ob.db.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx) //nolint:errcheck // closing a listener; nothing to do on error
	}()
	if _, err := conn.Exec(lctx, "LISTEN "+pgx.Identifier{r.ob.channel}.Sanitize()); err != nil {
		return err
	}
	cancel()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload != r.ob.id {
			r.signal()
		}
	}
}

// PublishBatch claims one batch, publishes it and records the outcome. It
// returns how many events it claimed. Exported for tests and benchmarks;
// Run calls it in a loop. Called outside Run, its leases carry no liveness
// key and end only with time.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	if _, live := r.live.owner(); r.running.Load() && !live {
		return 0, nil // no liveness session (lost, or not yet back): claim nothing
	}
	start := time.Now()
	// The claim is bounded (postgres.CallTimeout), as the mark is: on a
	// hung server a claim that never returns would stop the relay until
	// the server woke. A claim cut off leased nothing.
	cctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
	batch, l, err := r.claim(cctx)
	cancel()
	if err != nil || len(batch) == 0 {
		if err == nil {
			r.metrics.EmptyClaims.Inc()
		}
		return 0, err
	}
	results := r.send(ctx, batch, l.sendBy)
	err = r.record(ctx, batch, results, l.token)
	r.metrics.BatchSize.Observe(float64(len(batch)))
	r.metrics.BatchDuration.Observe(time.Since(start).Seconds())
	return len(batch), err
}
