package ledger

import (
	"context"
	"log/slog"
	"net"

	"github.com/paysuite/payments/pkg/consumer"
)

// Policy is the policy Run gives failed settlements.
var Policy = policy

// RunWithPolicy is Run with p handling failed settlements: the tests' own
// retry delays, shorter than production's.
func RunWithPolicy(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr), p consumer.Policy) error {
	return run(ctx, cfg, log, listening, p)
}
