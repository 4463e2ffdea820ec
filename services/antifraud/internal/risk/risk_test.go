package risk_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/envconfig"
	"github.com/paysuite/payments/services/antifraud/internal/risk"
)

func engine(tb testing.TB, cfg risk.Config) *risk.Engine {
	tb.Helper()
	e, err := risk.New(cfg)
	if err != nil {
		tb.Fatalf("risk.New: %v", err)
	}
	return e
}

func transfer(amount int64) risk.Transfer {
	return risk.Transfer{SourceAccount: "CC-001", DestAccount: "CC-002", AmountCents: amount, Currency: "BRL"}
}

// seedOnly is the seed's MotorDeRisco: only the high-amount rule.
func seedOnly() risk.Config {
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount, cfg.VelocityMaxCents = 0, 0
	return cfg
}

func TestHighAmountAroundTheSeedThreshold(t *testing.T) {
	e := engine(t, seedOnly())
	tests := []struct {
		amount int64
		want   risk.Assessment
	}{
		{1, risk.Assessment{Score: 10}},
		{30_000, risk.Assessment{Score: 10}},
		{9_999_999, risk.Assessment{Score: 10}},
		{10_000_000, risk.Assessment{Score: 95, Hits: []risk.Hit{{Rule: risk.RuleHighAmount, Score: 95}}, Block: true}},
		{10_000_001, risk.Assessment{Score: 95, Hits: []risk.Hit{{Rule: risk.RuleHighAmount, Score: 95}}, Block: true}},
		{1_000_000_000_000_000, risk.Assessment{Score: 95, Hits: []risk.Hit{{Rule: risk.RuleHighAmount, Score: 95}}, Block: true}},
	}
	for _, tt := range tests {
		got := e.Assess(risk.Input{Transfer: transfer(tt.amount)})
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("amount %d: mismatch (-want +got):\n%s", tt.amount, diff)
		}
	}
}

func TestThresholdIsConfigurable(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		amount    int64
		wantScore int
		wantBlock bool
	}{
		{"default 80, base score passes", 80, 100, 10, false},
		{"default 80, 95 blocks", 80, 10_000_000, 95, true},
		{"threshold equal to the score blocks", 95, 10_000_000, 95, true},
		{"threshold above the score passes", 96, 10_000_000, 95, false},
		{"threshold at the base score blocks everything", 10, 100, 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := seedOnly()
			cfg.BlockThreshold = tt.threshold
			a := engine(t, cfg).Assess(risk.Input{Transfer: transfer(tt.amount)})
			if a.Score != tt.wantScore || a.Block != tt.wantBlock {
				t.Errorf("score %d block %v, want score %d block %v", a.Score, a.Block, tt.wantScore, tt.wantBlock)
			}
		})
	}
}

func TestVelocity(t *testing.T) {
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 3
	cfg.VelocityMaxCents = 1_000_000
	cfg.VelocityWindow = 10 * time.Minute
	e := engine(t, cfg)
	count := risk.Hit{Rule: risk.RuleVelocityCount, Score: 90}
	amount := risk.Hit{Rule: risk.RuleVelocityAmount, Score: 90}

	tests := []struct {
		name    string
		history risk.History
		amount  int64
		want    risk.Assessment
	}{
		{"no history", risk.History{}, 100, risk.Assessment{Score: 10}},
		{"third transfer in the window is at the count limit", risk.History{Count: 2, AmountCents: 200}, 100,
			risk.Assessment{Score: 10}},
		{"fourth transfer in the window exceeds the count limit", risk.History{Count: 3, AmountCents: 300}, 100,
			risk.Assessment{Score: 90, Hits: []risk.Hit{count}, Block: true}},
		{"amount reaching the limit exactly passes", risk.History{Count: 1, AmountCents: 600_000}, 400_000,
			risk.Assessment{Score: 10}},
		{"amount exceeding the limit by one cent", risk.History{Count: 1, AmountCents: 600_000}, 400_001,
			risk.Assessment{Score: 90, Hits: []risk.Hit{amount}, Block: true}},
		{"one transfer alone above the amount limit", risk.History{}, 1_000_001,
			risk.Assessment{Score: 90, Hits: []risk.Hit{amount}, Block: true}},
		{"both limits", risk.History{Count: 5, AmountCents: 5_000_000}, 100,
			risk.Assessment{Score: 90, Hits: []risk.Hit{count, amount}, Block: true}},
		{"huge history does not overflow", risk.History{Count: 1, AmountCents: 1<<63 - 1}, 1,
			risk.Assessment{Score: 90, Hits: []risk.Hit{amount}, Block: true}},
		{"high amount and velocity: the max wins", risk.History{Count: 3}, 10_000_000,
			risk.Assessment{Score: 95, Hits: []risk.Hit{{Rule: risk.RuleHighAmount, Score: 95}, count, amount}, Block: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := e.Assess(risk.Input{Transfer: transfer(tt.amount), History: tt.history})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := e.Window(), 10*time.Minute; got != want {
		t.Errorf("Window() = %s, want %s", got, want)
	}
}

func TestVelocityLimitsDisabled(t *testing.T) {
	tests := []struct {
		name       string
		maxCount   int64
		maxCents   int64
		wantWindow time.Duration
		wantRules  []string
	}{
		{"both", 2, 100, time.Hour, []string{risk.RuleHighAmount, risk.RuleVelocityCount, risk.RuleVelocityAmount}},
		{"count only", 2, 0, time.Hour, []string{risk.RuleHighAmount, risk.RuleVelocityCount}},
		{"amount only", 0, 100, time.Hour, []string{risk.RuleHighAmount, risk.RuleVelocityAmount}},
		{"none: no history needed", 0, 0, 0, []string{risk.RuleHighAmount}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := risk.DefaultConfig()
			cfg.VelocityMaxCount, cfg.VelocityMaxCents = tt.maxCount, tt.maxCents
			e := engine(t, cfg)
			if diff := cmp.Diff(tt.wantRules, e.RuleNames()); diff != "" {
				t.Errorf("rules mismatch (-want +got):\n%s", diff)
			}
			if e.Window() != tt.wantWindow {
				t.Errorf("Window() = %s, want %s", e.Window(), tt.wantWindow)
			}
			a := e.Assess(risk.Input{Transfer: transfer(50), History: risk.History{Count: 1000, AmountCents: 1 << 40}})
			wantBlock := tt.maxCount > 0 || tt.maxCents > 0
			if a.Block != wantBlock {
				t.Errorf("Block = %v with a huge history, want %v (%s)", a.Block, wantBlock, a.Explain(e.Base()))
			}
		})
	}
}

func TestBlocklist(t *testing.T) {
	cfg := seedOnly()
	cfg.Blocklist = envconfig.List(" CC-666 , ,CC-013,") // as ANTIFRAUD_BLOCKLIST is read
	e := engine(t, cfg)
	src := risk.Hit{Rule: risk.RuleBlockedSource, Score: 100}
	dst := risk.Hit{Rule: risk.RuleBlockedDestination, Score: 100}
	tests := []struct {
		name   string
		source string
		dest   string
		want   risk.Assessment
	}{
		{"neither listed", "CC-001", "CC-002", risk.Assessment{Score: 10}},
		{"source listed", "CC-666", "CC-002", risk.Assessment{Score: 100, Hits: []risk.Hit{src}, Block: true}},
		{"destination listed", "CC-001", "CC-013", risk.Assessment{Score: 100, Hits: []risk.Hit{dst}, Block: true}},
		{"both listed", "CC-666", "CC-013", risk.Assessment{Score: 100, Hits: []risk.Hit{src, dst}, Block: true}},
		{"match is exact", "cc-666", "CC-0130", risk.Assessment{Score: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := risk.Input{Transfer: risk.Transfer{SourceAccount: tt.source, DestAccount: tt.dest, AmountCents: 100, Currency: "BRL"}}
			if diff := cmp.Diff(tt.want, e.Assess(in)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExplanation(t *testing.T) {
	cfg := risk.DefaultConfig()
	cfg.VelocityMaxCount = 1
	cfg.Blocklist = []string{"CC-999"}
	e := engine(t, cfg)
	tests := []struct {
		name      string
		in        risk.Input
		wantNames []string
		wantText  string
	}{
		{"nothing fired", risk.Input{Transfer: transfer(100)}, []string{},
			"score 10 = max(base 10)"},
		{"seed rule", risk.Input{Transfer: risk.Transfer{SourceAccount: "A", DestAccount: "B", AmountCents: 10_000_000}},
			[]string{risk.RuleHighAmount}, "score 95 = max(base 10, high_amount 95)"},
		{"three rules, in rule order", risk.Input{
			Transfer: risk.Transfer{SourceAccount: "A", DestAccount: "CC-999", AmountCents: 10_000_000},
			History:  risk.History{Count: 1}},
			[]string{risk.RuleHighAmount, risk.RuleVelocityCount, risk.RuleBlockedDestination},
			"score 100 = max(base 10, high_amount 95, velocity_count 90, blocklisted_destination_account 100)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.Assess(tt.in)
			if diff := cmp.Diff(tt.wantNames, a.RuleNames()); diff != "" {
				t.Errorf("rule names mismatch (-want +got):\n%s", diff)
			}
			if got := a.Explain(e.Base()); got != tt.wantText {
				t.Errorf("Explain() = %q, want %q", got, tt.wantText)
			}
		})
	}
}

func TestCustomRulesCombineByMax(t *testing.T) {
	always := func(risk.Input) bool { return true }
	never := func(risk.Input) bool { return false }
	tests := []struct {
		name  string
		base  int
		rules []risk.Rule
		want  risk.Assessment
	}{
		{"no rules: the base", 10, nil, risk.Assessment{Score: 10}},
		{"rules below the base do not lower it", 30, []risk.Rule{{Name: "low", Score: 5, When: always}},
			risk.Assessment{Score: 30, Hits: []risk.Hit{{Rule: "low", Score: 5}}}},
		{"weak signals never add up", 10, []risk.Rule{
			{Name: "a", Score: 50, When: always}, {Name: "b", Score: 60, When: always}, {Name: "c", Score: 99, When: never}},
			risk.Assessment{Score: 60, Hits: []risk.Hit{{Rule: "a", Score: 50}, {Rule: "b", Score: 60}}}},
		{"one strong signal blocks", 10, []risk.Rule{{Name: "a", Score: 50, When: always}, {Name: "b", Score: 80, When: always}},
			risk.Assessment{Score: 80, Hits: []risk.Hit{{Rule: "a", Score: 50}, {Rule: "b", Score: 80}}, Block: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := risk.NewEngine(tt.base, 80, 0, tt.rules...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, e.Assess(risk.Input{Transfer: transfer(1)})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvalidConfig(t *testing.T) {
	ok := func(risk.Input) bool { return true }
	tests := []struct {
		name string
		cfg  func(*risk.Config)
	}{
		{"threshold 0", func(c *risk.Config) { c.BlockThreshold = 0 }},
		{"threshold above 100", func(c *risk.Config) { c.BlockThreshold = 101 }},
		{"negative base", func(c *risk.Config) { c.BaseScore = -1 }},
		{"rule score above 100", func(c *risk.Config) { c.HighAmountScore = 101 }},
		{"negative high amount", func(c *risk.Config) { c.HighAmountCents = -1 }},
		{"negative count limit", func(c *risk.Config) { c.VelocityMaxCount = -1 }},
		{"negative amount limit", func(c *risk.Config) { c.VelocityMaxCents = -1 }},
		{"velocity without a window", func(c *risk.Config) { c.VelocityWindow = 0 }},
		{"blocklist score out of range", func(c *risk.Config) { c.Blocklist = []string{"X"}; c.BlocklistScore = 200 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := risk.DefaultConfig()
			tt.cfg(&cfg)
			if _, err := risk.New(cfg); !errors.Is(err, risk.ErrInvalidConfig) {
				t.Errorf("New() error = %v, want ErrInvalidConfig", err)
			}
		})
	}
	for name, rules := range map[string][]risk.Rule{
		"unnamed rule":      {{Score: 1, When: ok}},
		"rule without When": {{Name: "x", Score: 1}},
		"duplicate names":   {{Name: "x", Score: 1, When: ok}, {Name: "x", Score: 2, When: ok}},
	} {
		if _, err := risk.NewEngine(10, 80, 0, rules...); !errors.Is(err, risk.ErrInvalidConfig) {
			t.Errorf("%s: NewEngine() error = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := risk.New(risk.DefaultConfig()); err != nil {
		t.Errorf("DefaultConfig is invalid: %v", err)
	}
}
