package consume

import (
	"context"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// reapplyBatch is the most held results one pass of ReapplyLoop applies.
const reapplyBatch = 100

// ReapplyLoop applies, every interval until ctx ends, the held results
// received within window whose transfer has become visible with the
// request event they were decided for (Store.ReapplyHeld), and tells
// admission control what they moved: a result that came back before its
// transfer's commit was visible reaches the transfer with no operator. A
// pass that applied a full batch runs again at once. Past window a held
// result is left to an operator (transfers_results_held_overdue, alert
// TransfersResultsHeld). It returns nil.
func (p *Projection) ReapplyLoop(ctx context.Context, window, interval time.Duration) error {
	periodic.Every(ctx, periodic.Fixed(interval), func() {
		for ctx.Err() == nil {
			// Bounded: on a hung server the pass fails and the next one
			// reconnects (postgres.CallTimeout).
			cctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
			n, created, err := p.store.ReapplyHeld(cctx, window, reapplyBatch)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					p.log.WarnContext(ctx, "re-apply held results failed", "err", err)
				}
				return
			}
			p.tell(created)
			if n > 0 {
				p.log.InfoContext(ctx, "held results re-applied: their transfers became visible", "reapplied", n)
			}
			if n < reapplyBatch {
				return
			}
		}
	})
	return nil
}
