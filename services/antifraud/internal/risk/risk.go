// Package risk is the antifraud service's risk engine: a pure function from
// a transfer and the recent history of its source account to a score in
// 0..100 and the list of rules that produced it.
//
// Rules are values (a name, a score and a predicate), so that an engine is
// data that can be listed, tested and explained. How scores combine:
//
//	score = max(base, score of every rule that fired)
//
// The base score (10) is what an unremarkable transfer gets; each rule that
// fires raises the score to at least its own score; rules never add up, so
// a transfer's score is explained by its single strongest reason, and two
// weak signals never block a transfer that neither would block alone. A
// transfer is blocked when its score reaches the threshold (80).
//
// The engine does no I/O: the caller loads the history (approved transfers
// that the same client requested from the source account within Window
// before the transfer) and passes it in.
package risk

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxScore is the highest score; scores are in 0..MaxScore.
const MaxScore = 100

// Names of the standard rules, as stored with each decision and used as the
// rule label of the antifraud_rules_fired_total metric.
const (
	RuleHighAmount         = "high_amount"
	RuleVelocityCount      = "velocity_count"
	RuleVelocityAmount     = "velocity_amount"
	RuleBlockedSource      = "blocklisted_source_account"
	RuleBlockedDestination = "blocklisted_destination_account"
)

// Transfer is what the engine knows about the transfer being scored.
type Transfer struct {
	SourceAccount string
	DestAccount   string
	AmountCents   int64
	Currency      string
}

// History summarises the transfers of the source account, requested by the
// same client, that antifraud approved within the velocity window before
// the transfer being scored, that transfer excluded. Keying by client keeps
// one client's requests from using up another's quota on an account.
type History struct {
	Count       int64
	AmountCents int64
}

// Input is what a rule sees.
type Input struct {
	Transfer Transfer
	History  History
}

// Rule is one risk signal: when When holds for an input, the rule fires and
// the transfer's score is at least Score.
type Rule struct {
	Name  string
	Score int
	When  func(Input) bool
}

// Hit is a rule that fired, with the score it contributed.
type Hit struct {
	Rule  string
	Score int
}

// Assessment is the engine's verdict on one transfer.
type Assessment struct {
	// Score is max(base, scores of Hits).
	Score int
	// Hits are the rules that fired, in the engine's rule order.
	Hits []Hit
	// Block reports Score >= the engine's threshold.
	Block bool
}

// RuleNames returns the names of the rules that fired, in rule order.
func (a Assessment) RuleNames() []string {
	names := make([]string, len(a.Hits))
	for i, h := range a.Hits {
		names[i] = h.Rule
	}
	return names
}

// Explain says how the score came about, for logs and operators: for
// example "score 95 = max(base 10, high_amount 95)".
func (a Assessment) Explain(base int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "score %d = max(base %d", a.Score, base)
	for _, h := range a.Hits {
		fmt.Fprintf(&b, ", %s %d", h.Rule, h.Score)
	}
	b.WriteString(")")
	return b.String()
}

// Engine scores transfers with a fixed set of rules.
type Engine struct {
	base      int
	threshold int
	window    time.Duration
	rules     []Rule
}

// ErrInvalidConfig is returned by New and NewEngine for a configuration
// that cannot work (a score out of range, an empty rule name, a negative
// limit...).
var ErrInvalidConfig = errors.New("invalid risk configuration")

// NewEngine returns an engine with the given base score, blocking
// threshold, history window (0 when no rule reads History) and rules. It
// returns ErrInvalidConfig when a score is outside 0..100, the threshold
// outside 1..100, a rule has no name, no predicate or a duplicate name.
func NewEngine(base, threshold int, window time.Duration, rules ...Rule) (*Engine, error) {
	var errs []error
	if base < 0 || base > MaxScore {
		errs = append(errs, fmt.Errorf("base score %d is outside 0..%d", base, MaxScore))
	}
	if threshold < 1 || threshold > MaxScore {
		errs = append(errs, fmt.Errorf("block threshold %d is outside 1..%d", threshold, MaxScore))
	}
	if window < 0 {
		errs = append(errs, fmt.Errorf("window %s is negative", window))
	}
	seen := map[string]bool{}
	for i, r := range rules {
		switch {
		case r.Name == "":
			errs = append(errs, fmt.Errorf("rule %d has no name", i))
		case seen[r.Name]:
			errs = append(errs, fmt.Errorf("rule %q is defined twice", r.Name))
		}
		seen[r.Name] = true
		if r.When == nil {
			errs = append(errs, fmt.Errorf("rule %q has no predicate", r.Name))
		}
		if r.Score < 0 || r.Score > MaxScore {
			errs = append(errs, fmt.Errorf("rule %q score %d is outside 0..%d", r.Name, r.Score, MaxScore))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Engine{base: base, threshold: threshold, window: window, rules: append([]Rule(nil), rules...)}, nil
}

// Assess scores in. It is pure: the same input always gives the same
// assessment.
func (e *Engine) Assess(in Input) Assessment {
	a := Assessment{Score: e.base}
	for _, r := range e.rules {
		if !r.When(in) {
			continue
		}
		a.Hits = append(a.Hits, Hit{Rule: r.Name, Score: r.Score})
		a.Score = max(a.Score, r.Score)
	}
	a.Block = a.Score >= e.threshold
	return a
}

// Base is the score of a transfer no rule fires for.
func (e *Engine) Base() int { return e.base }

// Threshold is the score from which a transfer is blocked.
func (e *Engine) Threshold() int { return e.threshold }

// Window is how far back, from the transfer's time, the History passed to
// Assess must look; 0 means no rule reads History.
func (e *Engine) Window() time.Duration { return e.window }

// RuleNames lists the engine's rules in order.
func (e *Engine) RuleNames() []string {
	names := make([]string, len(e.rules))
	for i, r := range e.rules {
		names[i] = r.Name
	}
	return names
}

// Config parameterises the standard rules. A zero limit disables its rule.
type Config struct {
	// BaseScore is the score when no rule fires (10, as the seed).
	BaseScore int `env:"ANTIFRAUD_BASE_SCORE" help:"score when no rule fires"`
	// BlockThreshold blocks transfers scoring at least this (80).
	BlockThreshold int `env:"ANTIFRAUD_BLOCK_THRESHOLD" help:"rejected (BLOQUEADA_ANTIFRAUDE) from this score on, 1..100"`

	// HighAmountCents: a transfer of at least this many cents fires
	// high_amount (10_000_000 = R$ 100.000,00, the seed's rule).
	HighAmountCents int64 `env:"ANTIFRAUD_HIGH_AMOUNT_CENTS" help:"high_amount fires from this amount (R$ 100.000,00); 0 disables"`
	// HighAmountScore is high_amount's score (95, the seed's).
	HighAmountScore int `env:"ANTIFRAUD_HIGH_AMOUNT_SCORE" help:"score of high_amount"`

	// VelocityWindow is the sliding window of the velocity rules (1h).
	VelocityWindow time.Duration `env:"ANTIFRAUD_VELOCITY_WINDOW" help:"sliding window of the velocity rules"`
	// VelocityMaxCount: velocity_count fires when this transfer would make
	// more than VelocityMaxCount approved transfers of its source account
	// within the window (20).
	VelocityMaxCount int64 `env:"ANTIFRAUD_VELOCITY_MAX_COUNT" help:"approved transfers per source account and window beyond which velocity_count fires; 0 disables"`
	// VelocityMaxCents: velocity_amount fires when this transfer would make
	// the approved amount of its source account within the window exceed
	// VelocityMaxCents (20_000_000 = R$ 200.000,00).
	VelocityMaxCents int64 `env:"ANTIFRAUD_VELOCITY_MAX_CENTS" help:"approved cents per source account and window beyond which velocity_amount fires; 0 disables"`
	// VelocityScore is the score of both velocity rules (90).
	VelocityScore int `env:"ANTIFRAUD_VELOCITY_SCORE" help:"score of the velocity rules"`

	// Blocklist holds accounts whose transfers, as source or destination,
	// are blocked.
	Blocklist []string `env:"ANTIFRAUD_BLOCKLIST" help:"comma-separated accounts blocked as source or destination"`
	// BlocklistScore is the score of the blocklist rules (100).
	BlocklistScore int `env:"ANTIFRAUD_BLOCKLIST_SCORE" help:"score of the blocklist rules"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		BaseScore:        10,
		BlockThreshold:   80,
		HighAmountCents:  10_000_000,
		HighAmountScore:  95,
		VelocityWindow:   time.Hour,
		VelocityMaxCount: 20,
		VelocityMaxCents: 20_000_000,
		VelocityScore:    90,
		BlocklistScore:   100,
	}
}

// New returns the engine of the standard rules configured by cfg. It
// returns ErrInvalidConfig when cfg cannot work.
func New(cfg Config) (*Engine, error) {
	rules, err := StandardRules(cfg)
	if err != nil {
		return nil, err
	}
	var window time.Duration
	if cfg.VelocityMaxCount > 0 || cfg.VelocityMaxCents > 0 {
		window = cfg.VelocityWindow
	}
	return NewEngine(cfg.BaseScore, cfg.BlockThreshold, window, rules...)
}

// StandardRules returns the rules cfg enables, in this order: high_amount,
// velocity_count, velocity_amount, blocklisted_source_account,
// blocklisted_destination_account.
func StandardRules(cfg Config) ([]Rule, error) {
	var errs []error
	if cfg.HighAmountCents < 0 {
		errs = append(errs, fmt.Errorf("high amount %d is negative", cfg.HighAmountCents))
	}
	if cfg.VelocityMaxCount < 0 {
		errs = append(errs, fmt.Errorf("velocity max count %d is negative", cfg.VelocityMaxCount))
	}
	if cfg.VelocityMaxCents < 0 {
		errs = append(errs, fmt.Errorf("velocity max cents %d is negative", cfg.VelocityMaxCents))
	}
	if (cfg.VelocityMaxCount > 0 || cfg.VelocityMaxCents > 0) && cfg.VelocityWindow <= 0 {
		errs = append(errs, fmt.Errorf("velocity window %s must be positive when a velocity limit is set", cfg.VelocityWindow))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}

	var rules []Rule
	if cfg.HighAmountCents > 0 {
		rules = append(rules, HighAmount(cfg.HighAmountCents, cfg.HighAmountScore))
	}
	if cfg.VelocityMaxCount > 0 {
		rules = append(rules, VelocityCount(cfg.VelocityMaxCount, cfg.VelocityScore))
	}
	if cfg.VelocityMaxCents > 0 {
		rules = append(rules, VelocityAmount(cfg.VelocityMaxCents, cfg.VelocityScore))
	}
	if len(cfg.Blocklist) > 0 {
		set := make(map[string]bool, len(cfg.Blocklist))
		for _, a := range cfg.Blocklist {
			set[a] = true
		}
		rules = append(rules,
			Rule{Name: RuleBlockedSource, Score: cfg.BlocklistScore,
				When: func(in Input) bool { return set[in.Transfer.SourceAccount] }},
			Rule{Name: RuleBlockedDestination, Score: cfg.BlocklistScore,
				When: func(in Input) bool { return set[in.Transfer.DestAccount] }},
		)
	}
	return rules, nil
}

// HighAmount fires for a transfer of at least minCents (the seed's rule:
// valorEmCentavos >= 10_000_000 scores 95).
func HighAmount(minCents int64, score int) Rule {
	return Rule{Name: RuleHighAmount, Score: score,
		When: func(in Input) bool { return in.Transfer.AmountCents >= minCents }}
}

// VelocityCount fires when the transfer would be more than maxCount
// approved transfers of its source account within the window, itself
// included.
func VelocityCount(maxCount int64, score int) Rule {
	return Rule{Name: RuleVelocityCount, Score: score,
		When: func(in Input) bool { return in.History.Count >= maxCount }}
}

// VelocityAmount fires when the approved amount of the source account within
// the window, this transfer included, would exceed maxCents.
func VelocityAmount(maxCents int64, score int) Rule {
	return Rule{Name: RuleVelocityAmount, Score: score,
		When: func(in Input) bool { return addSat(in.History.AmountCents, in.Transfer.AmountCents) > maxCents }}
}

// addSat adds two non-negative amounts, saturating instead of overflowing.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// String renders the configuration for start-up logs.
func (c Config) String() string {
	return "base=" + strconv.Itoa(c.BaseScore) +
		" threshold=" + strconv.Itoa(c.BlockThreshold) +
		" high_amount_cents=" + strconv.FormatInt(c.HighAmountCents, 10) +
		" velocity_window=" + c.VelocityWindow.String() +
		" velocity_max_count=" + strconv.FormatInt(c.VelocityMaxCount, 10) +
		" velocity_max_cents=" + strconv.FormatInt(c.VelocityMaxCents, 10) +
		" blocklist_size=" + strconv.Itoa(len(c.Blocklist))
}
