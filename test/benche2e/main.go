// Command benche2e is the whole-flow load generator of `make bench-e2e`:
// it runs the four services on a real Kafka broker and
// PostgreSQL, as the all-in-one binary (`payments-dev run`) and as four
// processes, offers a series of rates open loop (each request leaves on a
// fixed schedule, whatever the answers to the earlier ones), and prints per
// rate the accepted and settled rates, the end-to-end latency from a
// transfer's creation (criada_em) to its terminal status (atualizada_em),
// the time per hop from the rows' timestamps, and each process's CPU and
// memory; then the highest rate sustained. Baselines of the same run:
// POST /transferencias alone (closed loop, transfers the only service
// running) and the floor: one record's produce-to-consume time on the same
// broker with the suite's client settings, times three hops.
//
// It needs TEST_DATABASE_URL (a PostgreSQL server; the bench drops and
// creates the databases payments_<service> on it) and TEST_KAFKA_BROKERS
// (it deletes and creates the suite's default topics): run it through
// test/infra/with-infra.sh, as `make bench-e2e` does, never against
// servers whose data matters.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/transfersig"
)

type options struct {
	modes        []string
	rates        []float64
	step         time.Duration
	warmup       time.Duration
	warmupMax    time.Duration
	drain        time.Duration
	accounts     int
	postClients  int
	postFor      time.Duration
	floorSamples int
	basePort     int
	maxInFlight  int
	maxConns     int
	logDir       string
	env          map[string]string
	profile      string
	profileCPU   bool
	// overload are the overload steps, multiples of the plateau the rates
	// found; relays are the OUTBOX_RELAY values measured in turn, and relay
	// the one of the run in progress (every service's).
	overload   []float64
	relays     []string
	relay      string
	warmupRate float64
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench-e2e", flag.ContinueOnError)
	modes := fs.String("modes", "all-in-one,four-processes", "deployments to measure, in order: all-in-one (payments-dev run on the broker), four-processes, embedded (payments-dev run on its in-process kfake, as make run)")
	rates := fs.String("rates", "1,50,100,200,400,800", "offered rates, requests per second, in order (a rate left undrained ends the series; a step of 1/s measures the suite idling, for the 100/s CPU line)")
	step := fs.Duration("step", 15*time.Second, "how long each rate is offered")
	drain := fs.Duration("drain", 30*time.Second, "longest wait after a step for its transfers to reach a terminal status")
	warmup := fs.Duration("warmup", 20*time.Second, "load before the first step of each deployment, not reported")
	warmupMax := fs.Duration("warmup-max", 80*time.Second, "longest warm-up: past -warmup it goes on in slices of "+jitSlice.String()+" until the broker's JIT compiler threads take less than "+strconv.FormatFloat(jitQuiet, 'f', -1, 64)+" cores over a slice, or this much in all")
	warmupRate := fs.Float64("warmup-rate", 300, "rate of the warm-up: high enough that the broker's JIT compiles its hot paths before the first step, not during it")
	accounts := fs.Int("accounts", 1000, "funded accounts the transfers pick from")
	postClients := fs.Int("post-clients", 8, "clients of the POST-alone baseline (closed loop)")
	postFor := fs.Duration("post-for", 10*time.Second, "duration of the POST-alone baseline")
	floorSamples := fs.Int("floor-samples", 200, "records of the produce-to-consume floor")
	basePort := fs.Int("port", 18080, "first of the four HTTP ports (transfers, ledger, antifraud, notifications)")
	maxInFlight := fs.Int("max-in-flight", 4000, "most outstanding requests; a request that finds them all busy leaves late (reported)")
	maxConns := fs.Int("max-conns", 256, "most connections the load generator holds to a service, as a client's pool does; past them a request waits for one, and its POST latency counts the wait (0: no bound, a connection per outstanding request)")
	logDir := fs.String("logs", "", "folder for the services' logs (default: a temporary folder, kept)")
	envFlag := fs.String("env", "", "extra service settings, comma-separated NAME=VALUE (e.g. ANTIFRAUD_BATCH_MAX=1)")
	profileCPU := fs.Bool("profile-cpu", true, "with -profile, also the CPU profiles (perf, JFR, pprof), which cost CPU of their own; false keeps the heap profiles and PostgreSQL's statements (a long memory run)")
	profile := fs.String("profile", "", "folder for profiles: each service's CPU profile per step and heap profile at start and end (binaries built with -tags benchprofile), PostgreSQL's statements per step (pg_stat_statements)")
	overload := fs.String("overload", "2,5", "overload steps after the rates, as multiples of the plateau (the highest settled/s of the rates), comma-separated; empty: none")
	relays := fs.String("relay", "polling,logical", "OUTBOX_RELAY of every service, comma-separated, each measured in turn beside baselines of its own: polling, logical (the WAL; PostgreSQL needs wal_level=logical, as test/infra/with-infra.sh starts it)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o := options{step: *step, warmup: *warmup, warmupMax: max(*warmup, *warmupMax), drain: *drain, accounts: *accounts, postClients: *postClients, postFor: *postFor,
		floorSamples: *floorSamples, basePort: *basePort, maxInFlight: *maxInFlight, maxConns: *maxConns, logDir: *logDir, env: map[string]string{},
		profile: *profile, profileCPU: *profileCPU, warmupRate: *warmupRate}
	for r := range strings.SplitSeq(*relays, ",") {
		if r = strings.TrimSpace(r); r != "polling" && r != "logical" {
			return fmt.Errorf("-relay: %q is neither polling nor logical", r)
		}
		o.relays = append(o.relays, strings.TrimSpace(r))
	}
	for m := range strings.SplitSeq(*overload, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		v, err := strconv.ParseFloat(m, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("-overload: %q is not a positive multiple", m)
		}
		o.overload = append(o.overload, v)
	}
	for m := range strings.SplitSeq(*modes, ",") {
		if m = strings.TrimSpace(m); m != "all-in-one" && m != "four-processes" && m != "embedded" {
			return fmt.Errorf("-modes: unknown deployment %q", m)
		}
		o.modes = append(o.modes, strings.TrimSpace(m))
	}
	for r := range strings.SplitSeq(*rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("-rates: %q is not a positive rate", r)
		}
		o.rates = append(o.rates, v)
	}
	for kv := range strings.SplitSeq(*envFlag, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-env: %q is not NAME=VALUE", kv)
		}
		o.env[k] = v
	}
	if o.accounts < 2 || o.step <= 0 || o.postClients < 1 || o.floorSamples < 1 || o.warmupRate <= 0 || o.maxInFlight < 1 || o.maxConns < 0 {
		return errors.New("-accounts must be at least 2; -step, -warmup-rate, -post-clients, -floor-samples and -max-in-flight positive; -max-conns 0 or more")
	}
	if *warmup < 0 || *warmupMax < 0 {
		return errors.New("-warmup and -warmup-max must be 0 or more")
	}
	serverURL, brokers := os.Getenv("TEST_DATABASE_URL"), os.Getenv("TEST_KAFKA_BROKERS")
	if serverURL == "" || brokers == "" {
		return errors.New("TEST_DATABASE_URL and TEST_KAFKA_BROKERS are required: run through test/infra/with-infra.sh (make bench-e2e)")
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bench-e2e-")
	if err != nil {
		return err
	}
	if o.logDir == "" {
		o.logDir = filepath.Join(tmp, "logs")
	}
	if err := os.MkdirAll(o.logDir, 0o755); err != nil { //nolint:gosec // logs
		return err
	}
	b := &bench{o: o, out: out, serverURL: serverURL, kcfg: broker.Config{Brokers: broker.ParseBrokers(brokers)},
		pgPort: urlPort(serverURL, 5432), kafkaPort: urlPort("kafka://"+firstBroker(broker.ParseBrokers(brokers))+"/", 9092)}

	var tags []string
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil { //nolint:gosec // profiles
			return err
		}
		tags = []string{"benchprofile"}
		b.prof = &profiler{dir: o.profile, serverURL: serverURL, out: out}
	}
	statements := trackStatements(ctx, serverURL, b.prof != nil, out)
	if b.prof != nil {
		b.prof.statements = statements
		// Idle again afterwards, as the next run without -profile expects.
		defer trackStatements(context.WithoutCancel(ctx), serverURL, false, out)
	}
	fmt.Fprintf(out, "bench-e2e: building the binaries into %s\n", tmp)
	if b.bins, err = build(ctx, root, tmp, tags); err != nil {
		return err
	}
	defer func() { // the logs stay
		for _, bin := range b.bins {
			_ = os.Remove(bin)
		}
	}()
	keyDir := filepath.Join(tmp, "auth")
	if _, err := auth.GenerateKey(keyDir); err != nil {
		return err
	}
	if _, err := transfersig.GenerateKey(keyDir, keyDir); err != nil {
		return err
	}
	key, err := auth.ReadSigningKey(filepath.Join(keyDir, auth.KeyFile))
	if err != nil {
		return err
	}
	token, err := key.Sign(auth.Claims{Issuer: "bench-e2e", Audience: auth.DefaultAudience, Subject: "bench",
		Scopes: []string{auth.ScopeTransfersCreate, auth.ScopeTransfersRead, auth.ScopeAccountsAdmin, auth.ScopeAccountsRead, auth.ScopeOperations},
		TTL:    12 * time.Hour})
	if err != nil {
		return err
	}
	minter, err := key.Sign(auth.Claims{Issuer: "bench-e2e", Audience: auth.DefaultAudience, Subject: "bench-tesouraria",
		Scopes: []string{auth.ScopeAccountsDeposit}, TTL: 12 * time.Hour})
	if err != nil {
		return err
	}
	b.api = newAPI(token, minter, b.o.maxConns)
	b.baseEnv = map[string]string{
		"AUTH_JWKS_FILE": filepath.Join(keyDir, auth.JWKSFile), "AUTH_ISSUER": "bench-e2e",
		"TRANSFERS_AUTHORIZATION_KEY_FILE": filepath.Join(keyDir, transfersig.KeyFile),
		"LEDGER_AUTHORIZATION_JWKS_FILE":   filepath.Join(keyDir, transfersig.JWKSFile),
		"KAFKA_BROKERS":                    brokers, "LOG_LEVEL": "warn", "LOG_FORMAT": "text",
		// One client sends everything: no rate limit in the way.
		"RATE_LIMIT_RPS": "1000000", "RATE_LIMIT_BURST": "1000000",
		// Velocity rules off: random transfers
		// between a fixed set of accounts would trip them.
		"ANTIFRAUD_VELOCITY_MAX_COUNT": "0", "ANTIFRAUD_VELOCITY_MAX_CENTS": "0",
		// One minter funds every account of every phase at the ceiling
		// of one deposit: no daily minting ceiling in the way.
		"LEDGER_MAX_DEPOSIT_CENTS_PER_DAY": "1000000000000000000",
	}
	for k, v := range o.env {
		b.baseEnv[k] = v
	}
	fmt.Fprintf(out, "bench-e2e: logs in %s; PostgreSQL %s (%s); Kafka %s\n", o.logDir, envconfig.RedactDSN(serverURL),
		durability(ctx, serverURL), brokers)
	fmt.Fprintf(out, "bench-e2e: %d accounts, rates %v/s for %s each, %s drain; overload steps %vx the plateau; OUTBOX_RELAY %v in turn\n\n",
		o.accounts, o.rates, o.step, o.drain, o.overload, o.relays)

	var runs []*bench
	for _, relay := range o.relays {
		r := b.forRelay(relay)
		fmt.Fprintf(out, "=== OUTBOX_RELAY=%s\n", relay)
		if err := r.baselines(ctx); err != nil {
			return fmt.Errorf("%s: baselines: %w", relay, err)
		}
		for _, m := range o.modes {
			if err := r.deployment(ctx, m); err != nil {
				return fmt.Errorf("%s: %s: %w", relay, m, err)
			}
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		r.summary()
	}
	return nil
}

// forRelay is a copy of b for one OUTBOX_RELAY: the same binaries, keys and
// servers, its own baselines and results.
func (b *bench) forRelay(relay string) *bench {
	r := *b
	r.o.relay = relay
	r.baseEnv = map[string]string{"OUTBOX_RELAY": relay}
	for k, v := range b.baseEnv {
		if k != "OUTBOX_RELAY" { // -env does not override the relay measured
			r.baseEnv[k] = v
		}
	}
	return &r
}

type bench struct {
	o         options
	out       io.Writer
	serverURL string
	kcfg      broker.Config
	bins      map[string]string
	api       *api
	baseEnv   map[string]string

	postRate float64
	postP99  time.Duration
	// postCPU is the CPU of one accepted POST of the POST-alone baseline,
	// counted as a step's CPU per settled transfer is.
	postCPU  time.Duration
	floorP50 time.Duration
	// commitP50 is one durable commit's latency on the server; shedRate
	// and shedCPU the POSTs shed per second, and the CPU of one, with the
	// transfers service alone and admission made to shed.
	commitP50 time.Duration
	shedRate  float64
	shedCPU   time.Duration
	sustained map[string]float64
	plateau   map[string]float64
	rows      map[string][]stepRow

	// prof is set by -profile; pgPort and kafkaPort find the servers'
	// processes for their CPU figures.
	prof              *profiler
	pgPort, kafkaPort int
}

func (b *bench) url(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", b.o.basePort+i) }

// reset drops the services' databases and the suite's topics, and creates
// both afresh.
func (b *bench) reset(ctx context.Context) (dbs, error) {
	conn, err := pgx.Connect(ctx, b.serverURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	d := dbs{}
	for _, s := range services {
		name := "payments_" + s
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return nil, err
		}
		pool, err := pgxpool.New(ctx, dbURL(b.serverURL, name))
		if err != nil {
			return nil, err
		}
		d[s] = pool
	}
	specs := broker.SuiteTopics(events.DefaultTopics, 1)
	adm, err := broker.NewAdminClient(b.kcfg)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	if _, err := adm.DeleteTopics(ctx, names...); err != nil {
		return nil, fmt.Errorf("delete topics: %w", err)
	}
	// Deletion completes in the background: retry the creation.
	for attempt := 0; ; attempt++ {
		created, err := broker.CreateTopics(ctx, b.kcfg, specs)
		if err == nil && len(created) == len(specs) {
			break
		}
		if attempt == 60 {
			return nil, fmt.Errorf("create topics: %d of %d created: %v", len(created), len(specs), err)
		}
		if err == nil && len(created) > 0 {
			// Some existed still; delete those again on the next round.
			specs = remaining(specs, created)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return d, nil
}

func remaining(specs []broker.TopicSpec, created []string) []broker.TopicSpec {
	done := map[string]bool{}
	for _, c := range created {
		done[c] = true
	}
	var out []broker.TopicSpec
	for _, s := range specs {
		if !done[s.Name] {
			out = append(out, s)
		}
	}
	return out
}

// startServices starts the deployment and waits until every service is
// ready. only, when set, starts that one service alone (four-processes).
func (b *bench) startServices(ctx context.Context, mode, only string) ([]*proc, error) {
	var procs []*proc
	var urls []string
	if oneProcess(mode) {
		env := map[string]string{"DATABASE_URL": b.serverURL}
		for k, v := range b.baseEnv {
			env[k] = v
		}
		if mode == "embedded" { // make run: franz-go's kfake in the process
			delete(env, "KAFKA_BROKERS")
		}
		for i, s := range services {
			env[strings.ToUpper(s)+"_HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", b.o.basePort+i)
			urls = append(urls, b.url(i))
		}
		if b.prof != nil {
			env["PPROF_ADDR"] = b.pprofAddr(0)
		}
		p, err := start("payments", b.bins["payments"], []string{"run"}, env, b.o.logDir)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	} else {
		for i, s := range services {
			if only != "" && s != only {
				continue
			}
			env := map[string]string{"DATABASE_URL": dbURL(b.serverURL, "payments_"+s),
				"HTTP_ADDR": fmt.Sprintf("127.0.0.1:%d", b.o.basePort+i)}
			for k, v := range b.baseEnv {
				env[k] = v
			}
			if b.prof != nil {
				env["PPROF_ADDR"] = b.pprofAddr(i)
			}
			p, err := start(s, b.bins[s], nil, env, b.o.logDir)
			if err != nil {
				stopAll(procs)
				return nil, err
			}
			procs = append(procs, p)
			urls = append(urls, b.url(i))
		}
	}
	if err := waitReady(ctx, procs, urls); err != nil {
		stopAll(procs)
		return nil, err
	}
	return procs, nil
}

func stopAll(ps []*proc) {
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].stop()
	}
}

// baselines measures POST alone and the three-hop floor.
func (b *bench) baselines(ctx context.Context) error {
	fmt.Fprintln(b.out, "== Baselines")
	if _, err := b.reset(ctx); err != nil {
		return err
	}
	// Accounts live in the ledger: start it alone to open them, then the
	// transfers service alone (the consumers not running).
	ledgerProcs, err := b.startServices(ctx, "four-processes", "ledger")
	if err != nil {
		return err
	}
	accounts, err := b.api.openAccounts(ctx, b.url(1), "P-"+uuid.NewString()[:8], min(b.o.accounts, 100))
	stopAll(ledgerProcs)
	if err != nil {
		return err
	}
	alone, err := b.postAlone(ctx, accounts, nil, 2*time.Second)
	if err != nil {
		return err
	}
	b.postRate, b.postP99, b.postCPU = alone.rate, alone.lat.p99, alone.cpu
	fmt.Fprintf(b.out, "POST /transferencias alone (transfers process only, %d clients closed loop, %s): %.0f accepted/s, p50 %s ms, p99 %s ms (%d of %d answered 202); CPU %s ms per accepted POST (the process, PostgreSQL and the broker)\n",
		b.o.postClients, b.o.postFor, b.postRate, ms(alone.lat.p50), ms(alone.lat.p99), alone.lat.n, alone.answered, msf(b.postCPU))
	// The same with every POST shed: no relay, and admission sheds past
	// one pending outbox event. Its rate decays to the least it admits
	// (one a second) within seconds of the warm-up.
	shed, err := b.postAlone(ctx, accounts, map[string]string{"OUTBOX_RELAY_ENABLED": "false", "ADMISSION_MAX_OUTBOX_PENDING": "1"}, 10*time.Second)
	if err != nil {
		return err
	}
	b.shedRate, b.shedCPU = float64(shed.shed)/b.o.postFor.Seconds(), shed.cpuShed
	fmt.Fprintf(b.out, "POST /transferencias shed (the same, admission made to shed): %.0f shed/s, %d accepted; CPU %s ms per shed POST = %.3f x an accepted POST's\n",
		b.shedRate, shed.lat.n, msf3(b.shedCPU), float64(b.shedCPU)/float64(max(b.postCPU, 1)))
	commits, err := commitLatencies(ctx, b.serverURL, b.o.floorSamples)
	if err != nil {
		return fmt.Errorf("commit floor: %w", err)
	}
	cl := summarise(commits)
	b.commitP50 = cl.p50
	fmt.Fprintf(b.out, "one durable commit (one-row INSERT, autocommit, %d in a row): p50 %s ms, p99 %s ms\n", cl.n, msf(cl.p50), msf(cl.p99))

	// The first records of a fresh client and topic find the broker's
	// fetch and produce paths cold (its JIT, the client's connections): a
	// first round is thrown away, so that the floor is a warm one.
	if _, err := floor(ctx, b.kcfg, "bench-e2e.floor."+uuid.NewString()[:8], b.o.floorSamples); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	samples, err := floor(ctx, b.kcfg, "bench-e2e.floor."+uuid.NewString()[:8], b.o.floorSamples)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	fl := summarise(samples)
	b.floorP50 = fl.p50
	fmt.Fprintf(b.out, "floor: one record produce-to-consume (broker.NewProducer -> broker.NewGroup, %d records): p50 %s ms, p99 %s ms; three hops: %s ms\n\n",
		fl.n, msf(fl.p50), msf(fl.p99), msf(3*fl.p50))
	return nil
}

// aloneResult is what postAlone measured.
type aloneResult struct {
	rate           float64
	lat            dist
	answered, shed int
	cpu, cpuShed   time.Duration
}

// postAlone runs the transfers service alone with env added to its own,
// warms it up for warm, and then measures POST /transferencias closed loop
// for -post-for: the accepted rate and latency, and the CPU of the
// process, PostgreSQL and the broker (counted as a step's is, so that the
// figures compare; the load generator left out) per accepted POST and per
// shed one.
func (b *bench) postAlone(ctx context.Context, accounts []string, env map[string]string, warm time.Duration) (aloneResult, error) {
	saved := b.baseEnv
	b.baseEnv = map[string]string{}
	for k, v := range saved {
		b.baseEnv[k] = v
	}
	for k, v := range env {
		b.baseEnv[k] = v
	}
	procs, err := b.startServices(ctx, "four-processes", "transfers")
	b.baseEnv = saved
	if err != nil {
		return aloneResult{}, err
	}
	defer stopAll(procs)
	b.api.closedLoop(ctx, b.url(0), accounts, b.o.postClients, warm)
	cpu := stepRow{usage: map[string][2]usage{}, servers: map[string]time.Duration{}}
	before, _ := readUsage(procs[0].cmd.Process.Pid)
	serversBefore := serverUsage(b.pgPort, b.kafkaPort)
	rs := b.api.closedLoop(ctx, b.url(0), accounts, b.o.postClients, b.o.postFor)
	after, _ := readUsage(procs[0].cmd.Process.Pid)
	cpu.usage[procs[0].name] = [2]usage{before, after}
	for name, c := range serverUsage(b.pgPort, b.kafkaPort) {
		cpu.servers[name] = c - serversBefore[name]
	}
	var lat []time.Duration
	res := aloneResult{answered: len(rs)}
	for _, r := range rs {
		switch {
		case r.status == http.StatusAccepted:
			lat = append(lat, r.latency)
		case r.overloaded:
			res.shed++
		}
	}
	res.lat = summarise(lat)
	res.rate = float64(len(lat)) / b.o.postFor.Seconds()
	res.cpu = cpuPerSettled(cpu, len(lat))
	res.cpuShed = cpuPerSettled(cpu, res.shed)
	return res, nil
}

// stepRow is one rate's line.
type stepRow struct {
	offered, accepted, settled float64
	late                       int
	errors                     map[int]int
	post                       dist
	e2e                        dist
	pendingEnd                 int
	undrained                  int
	sustained                  bool
	hops                       map[string]dist
	usage                      map[string][2]usage
	// servers is the CPU time of PostgreSQL and the broker over the step;
	// busy and total the whole machine's.
	servers     map[string]time.Duration
	busy, total time.Duration
	// multiple is the overload step's multiple of the plateau; 0 for the
	// rates.
	multiple float64
	// shed counts 503 overloaded answers; heapMiB is the Go heap in use of
	// every process at the step's end; cpuPerSettled the CPU of every
	// process (PostgreSQL and the broker included) over the step per
	// transfer settled in it.
	shed          int
	heapMiB       float64
	cpuPerSettled time.Duration
	// cpu is the CPU of every process over the step; jit the part of the
	// broker's that its JIT compiler threads took (counted in cpu too).
	cpu, jit time.Duration
	// windows is the settled rate of each whole 5 s of the step.
	windows []float64
	// elapsed is the step's length as measured.
	elapsed time.Duration
	// work is each round-trip counter's growth over the step (counters).
	work map[string]float64
	// generator is the CPU of this process, the load generator, over the
	// step: on the same cores as the suite, not counted in cpu.
	generator time.Duration
}

// settledCount is how many transfers settled in the step.
func (r stepRow) settledCount() float64 { return r.settled * r.elapsed.Seconds() }

// busyCores is how many of the machine's cores were busy over the step,
// every process counted.
func (r stepRow) busyCores() float64 {
	if r.total <= 0 {
		return 0
	}
	return float64(runtime.NumCPU()) * float64(r.busy) / float64(r.total)
}

// deployment measures one deployment at every rate.
func (b *bench) deployment(ctx context.Context, mode string) error {
	fmt.Fprintf(b.out, "== %s, OUTBOX_RELAY=%s\n", mode, b.o.relay)
	d, err := b.reset(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range d {
			p.Close()
		}
	}()
	procs, err := b.startServices(ctx, mode, "")
	if err != nil {
		return err
	}
	defer stopAll(procs)
	accounts, err := b.api.openAccounts(ctx, b.url(1), "B-"+uuid.NewString()[:8], b.o.accounts)
	if err != nil {
		return err
	}
	// Warm-up, not reported: the broker's JIT compiles its hot paths
	// meanwhile. At a low rate it does not: after 10 s at 100/s its C2
	// compiler threads still took a quarter of the machine in the first
	// step, charged to that step's transfers. Nor always within 20 s at
	// 300/s, so the load goes on until the compiler is quiet.
	took, jit := warmUp(b.o.warmup, b.o.warmupMax, jitSlice, jitQuiet, func(d time.Duration) {
		b.api.openLoop(ctx, b.url(0), accounts, b.o.warmupRate, d, b.o.maxInFlight)
	}, func() time.Duration { return jitUsage(b.kafkaPort) })
	fmt.Fprintf(b.out, "%s: warm-up %s at %.0f/s; the broker's JIT compiler at %.2f cores in its last %s\n", mode, took, b.o.warmupRate, jit, jitSlice)
	b.waitDrained(ctx, d, b.o.drain)
	// The heap's start is taken warm, after the first load: its growth to
	// the end is what the steps added, not the caches and pools the first
	// requests fill.
	heapStart := b.heaps(ctx, mode)
	if b.prof != nil {
		b.heapProfiles(ctx, procs, b.o.relay+"-"+mode+"-start")
	}

	var rows []stepRow
	for _, rate := range b.o.rates {
		row, err := b.step(ctx, mode, d, procs, accounts, rate)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		if row.undrained > 0 {
			fmt.Fprintf(b.out, "(%.0f/s left %d transfers PENDENTE after the %s drain: higher rates not offered)\n", rate, row.undrained, b.o.drain)
			break
		}
	}
	rows, err = b.overloadSteps(ctx, mode, d, procs, accounts, rows)
	if err != nil {
		return err
	}
	heapEnd := b.heaps(ctx, mode)
	if b.prof != nil {
		b.heapProfiles(ctx, procs, b.o.relay+"-"+mode+"-end")
	}
	b.table(mode, procs, rows)
	b.workTable(mode, rows)
	fmt.Fprint(b.out, "heap in use (MiB, go_memstats_heap_inuse_bytes) start -> end:")
	for _, s := range heapOrder(mode) {
		fmt.Fprintf(b.out, " %s %.1f -> %.1f;", s, heapStart[s], heapEnd[s])
	}
	fmt.Fprintln(b.out)
	if b.sustained == nil {
		b.sustained, b.rows, b.plateau = map[string]float64{}, map[string][]stepRow{}, map[string]float64{}
	}
	b.rows[mode] = rows
	b.plateau[mode] = plateau(rows)
	for _, r := range rows {
		if r.sustained && r.multiple == 0 {
			b.sustained[mode] = max(b.sustained[mode], r.offered)
		}
	}
	fmt.Fprintf(b.out, "highest rate sustained (%s; pending at the step's end under one second of arrivals, end-to-end p99 under 1 s): %.0f/s; plateau (highest settled/s of the rates): %.1f/s\n\n",
		mode, b.sustained[mode], b.plateau[mode])
	return nil
}

// oneProcess reports a deployment of one process: all-in-one
// (payments-dev run on the bench's broker) or embedded (the same on its
// own in-process fake broker, kfake, as make run starts it).
func oneProcess(mode string) bool { return mode == "all-in-one" || mode == "embedded" }

func heapOrder(mode string) []string {
	if oneProcess(mode) {
		return []string{"payments"}
	}
	return services
}

// heaps reads the Go heap of each process (the all-in-one binary serves
// one process's figures on each port).
func (b *bench) heaps(ctx context.Context, mode string) map[string]float64 {
	out := map[string]float64{}
	if oneProcess(mode) {
		out["payments"] = heapInUse(ctx, b.url(0))
		return out
	}
	for i, s := range services {
		out[s] = heapInUse(ctx, b.url(i))
	}
	return out
}

// waitDrained waits up to limit for no transfer to be PENDENTE and returns
// how many still are.
func (b *bench) waitDrained(ctx context.Context, d dbs, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n, err := pendingCount(ctx, d["transfers"])
		if err == nil && n == 0 {
			return 0
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (b *bench) step(ctx context.Context, mode string, d dbs, procs []*proc, accounts []string, rate float64) (stepRow, error) {
	row := stepRow{offered: rate, errors: map[int]int{}, usage: map[string][2]usage{}}
	before := map[string]usage{}
	for _, p := range procs {
		before[p.name], _ = readUsage(p.cmd.Process.Pid)
	}
	serversBefore := serverUsage(b.pgPort, b.kafkaPort)
	jitBefore := jitUsage(b.kafkaPort)
	selfBefore, _ := readUsage(os.Getpid())
	workBefore := b.counters(ctx, mode, d)
	busyBefore, totalBefore := machineBusy()
	profiled := make(chan struct{})
	if b.prof != nil {
		b.prof.resetStatements(ctx)
	}
	if b.prof != nil && b.o.profileCPU {
		// The profile covers the step but its last second, so that it is
		// written by the time the step ends.
		go func() {
			defer close(profiled)
			prefix := fmt.Sprintf("%s-%s-%.0f", b.o.relay, mode, rate)
			var wg sync.WaitGroup
			wg.Go(func() { b.serverProfiles(ctx, b.o.step-time.Second, prefix) })
			b.cpuProfiles(ctx, procs, b.o.step-time.Second, prefix)
			wg.Wait()
		}()
	} else {
		close(profiled)
	}
	start := time.Now()
	rs := b.api.openLoop(ctx, b.url(0), accounts, rate, b.o.step, b.o.maxInFlight)
	end := time.Now()
	for _, p := range procs {
		after, _ := readUsage(p.cmd.Process.Pid)
		row.usage[p.name] = [2]usage{before[p.name], after}
	}
	busyAfter, totalAfter := machineBusy()
	row.busy, row.total = busyAfter-busyBefore, totalAfter-totalBefore
	row.jit, row.elapsed = jitUsage(b.kafkaPort)-jitBefore, end.Sub(start)
	if selfAfter, err := readUsage(os.Getpid()); err == nil {
		row.generator = selfAfter.cpu - selfBefore.cpu
	}
	row.work = map[string]float64{}
	for n, v := range b.counters(ctx, mode, d) {
		row.work[n] = v - workBefore[n]
	}
	row.servers = map[string]time.Duration{}
	for name, cpu := range serverUsage(b.pgPort, b.kafkaPort) {
		row.servers[name] = cpu - serversBefore[name]
	}
	var ids []uuid.UUID
	var lat []time.Duration
	for _, r := range rs {
		if r.late > 10*time.Millisecond {
			row.late++
		}
		switch {
		case r.status == http.StatusAccepted:
			ids = append(ids, r.id)
			lat = append(lat, r.latency)
		case r.overloaded:
			row.shed++
		default:
			row.errors[r.status]++
		}
	}
	row.accepted = float64(len(ids)) / b.o.step.Seconds()
	row.post = summarise(lat)
	var err error
	if row.pendingEnd, err = pendingCount(ctx, d["transfers"]); err != nil {
		return row, err
	}
	settled, err := terminalBetween(ctx, d["transfers"], start, end)
	if err != nil {
		return row, err
	}
	// The profiles' summaries are written by now or soon: the drain wait
	// below is not measured.
	<-profiled
	if b.prof != nil {
		b.prof.dumpStatements(ctx, fmt.Sprintf("%s-%s-%.0f-postgresql.txt", b.o.relay, mode, rate), settled)
	}
	row.settled = float64(settled) / end.Sub(start).Seconds()
	if row.windows, err = settledWindows(ctx, d["transfers"], start, end); err != nil {
		return row, err
	}
	row.cpuPerSettled = cpuPerSettled(row, settled)
	row.cpu = rowCPU(row)
	for _, h := range b.heaps(ctx, mode) {
		row.heapMiB += max(h, 0)
	}
	row.undrained = b.waitDrained(ctx, d, b.o.drain)
	f, err := measureFlow(ctx, d, ids)
	if err != nil {
		return row, err
	}
	row.e2e = summarise(f.e2e)
	row.hops = map[string]dist{}
	for _, h := range hops {
		row.hops[h] = summarise(f.hops[h])
	}
	row.sustained = row.undrained == 0 && float64(row.pendingEnd) < rate && row.e2e.n > 0 && row.e2e.p99 < time.Second
	return row, nil
}

func (b *bench) table(mode string, procs []*proc, rows []stepRow) {
	fmt.Fprintf(b.out, "\n%s: per rate (latencies in ms; end to end = criada_em -> atualizada_em)\n", mode)
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\toffered/s\taccepted/s\tsettled/s\tshed/s\tPOST p50\tPOST p99\te2e p50\tp90\tp99\tmax\tpending at end\tlate sends\terrors\theap MiB\tCPU ms/settled\tsustained\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%v\t%.1f\t%s\t%v\t\n", stepName(r), r.offered, r.accepted, r.settled,
			float64(r.shed)/b.o.step.Seconds(), ms(r.post.p50), ms(r.post.p99), ms(r.e2e.p50), ms(r.e2e.p90), ms(r.e2e.p99), ms(r.e2e.max),
			r.pendingEnd, r.late, r.errors, r.heapMiB, msf(r.cpuPerSettled), r.sustained)
	}
	_ = tw.Flush()
	fmt.Fprintf(b.out, "\n%s: settled/s in each whole %s of the step, from atualizada_em (the flow's own spread at a constant offered load)\n", mode, window)
	for _, r := range rows {
		fmt.Fprintf(b.out, "%12s: %s\n", fmt.Sprintf("%.0f/s", r.offered), windowLine(r.windows))
	}
	fmt.Fprintf(b.out, "\n%s: time per hop, p50 / p99 ms (rows' timestamps; an outbox's figure is its wait and its send together)\n", mode)
	tw = tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	rateHeader(tw, "hop", rows)
	for _, h := range hops {
		fmt.Fprintf(tw, "%s\t", h)
		for _, r := range rows {
			fmt.Fprintf(tw, "%s / %s\t", ms(r.hops[h].p50), ms(r.hops[h].p99))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintf(b.out, "\n%s: processes, CPU (cores busy, from /proc/<pid>/stat) and RSS at the step's end (MiB)\n", mode)
	tw = tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	rateHeader(tw, "process", rows)
	for _, p := range procs {
		fmt.Fprintf(tw, "%s\t", p.name)
		for _, r := range rows {
			u := r.usage[p.name]
			wall := u[1].at.Sub(u[0].at).Seconds()
			fmt.Fprintf(tw, "%.2f cores, %.0f MiB\t", (u[1].cpu-u[0].cpu).Seconds()/wall, float64(u[1].rssKiB)/1024)
		}
		fmt.Fprintln(tw)
	}
	for _, name := range []string{"postgresql (all processes)", "kafka broker (JVM)"} {
		fmt.Fprintf(tw, "%s\t", name)
		for _, r := range rows {
			fmt.Fprintf(tw, "%.2f cores\t", r.servers[name].Seconds()/b.o.step.Seconds())
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "of which the broker's JIT compiler\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%.2f cores\t", r.jit.Seconds()/b.o.step.Seconds())
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "load generator (this bench, not in CPU ms/settled)\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%.2f cores\t", r.generator.Seconds()/b.o.step.Seconds())
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "machine, all processes\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%.2f of %d cores\t", r.busyCores(), runtime.NumCPU())
	}
	fmt.Fprintln(tw)
	_ = tw.Flush()
}

// nearest returns the row whose offered rate is nearest rate.
func nearest(rows []stepRow, rate float64) (stepRow, bool) {
	var best stepRow
	found := false
	for _, r := range rows {
		if !found || abs(r.offered-rate) < abs(best.offered-rate) {
			best, found = r, true
		}
	}
	return best, found
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// dbURL is serverURL with its database replaced by name.
func dbURL(serverURL, name string) string {
	i := strings.Index(serverURL, "://")
	rest := serverURL[i+3:]
	path := strings.IndexByte(rest, '/')
	query := ""
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		query = rest[q:]
		rest = rest[:q]
	}
	if path >= 0 && path < len(rest) {
		rest = rest[:path]
	}
	return serverURL[:i+3] + rest + "/" + name + query
}

// urlPort is the port of a URL, or def.
func urlPort(raw string, def int) int {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		return def
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return def
	}
	return p
}

// firstBroker is the first of brokers, or "".
func firstBroker(brokers []string) string {
	if len(brokers) == 0 {
		return ""
	}
	return brokers[0]
}
