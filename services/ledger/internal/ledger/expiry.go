package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/paysuite/payments/pkg/periodic"
	"github.com/paysuite/payments/pkg/postgres"
)

// CloseReservation applies one capture or cancellation in its own transaction.
// AlreadyClosed is a result, not an error; ErrNotReserved,
// ErrCaptureAmount and ErrForeignCommand are the ledger's refusals (see
// their declaration); any other error is a failure worth retrying.
func (s *Service) CloseReservation(ctx context.Context, c Command) (Result, error) {
	rs, err := s.store.CloseReservations(ctx, []Command{c}, s.rules.Closer(s.now().UTC()))
	if err != nil {
		return Result{}, fmt.Errorf("close the reservation of %s: %w", c.TransferID, err)
	}
	return rs[0], nil
}

// CloseReservations applies cs, in order, in one transaction: all or nothing,
// with the results of applying them one by one. A permanent error of one
// command fails the batch, so that each can then be applied alone.
func (s *Service) CloseReservations(ctx context.Context, cs []Command) ([]Result, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	rs, err := s.store.CloseReservations(ctx, cs, s.rules.Closer(s.now().UTC()))
	if err != nil {
		return nil, fmt.Errorf("close a batch of %d reservations (first %s): %w", len(cs), cs[0].TransferID, err)
	}
	return rs, nil
}

// ExpireDue releases, in one transaction, up to limit open reservations
// past their expiry, skipping those another transaction holds (another
// ledger instance's sweep, or a capture or cancellation in flight, which
// then closes it itself). It returns one Expired result per reservation
// released.
func (s *Service) ExpireDue(ctx context.Context, limit int) ([]Result, error) {
	now := s.now().UTC()
	rs, err := s.store.ExpireDue(ctx, now, limit, s.rules.Closer(now))
	if err != nil {
		return nil, fmt.Errorf("expire reservations due at %s: %w", now.Format(time.RFC3339), err)
	}
	return rs, nil
}

// RunExpiry is the ledger's expiry sweep: every interval it releases the
// reservations past their expiry, batch at a time, until fewer than batch
// were due, and then waits again; it returns when ctx ends. Any number of
// ledger instances may run it at once: each reservation is released once.
// A failed sweep is logged and tried again at the next interval. expired,
// when not nil, is given the results of each transaction that released
// some (metrics).
func (s *Service) RunExpiry(ctx context.Context, interval time.Duration, batch int, log *slog.Logger, expired func([]Result)) {
	periodic.Every(ctx, periodic.Fixed(interval), func() {
		for ctx.Err() == nil {
			// One transaction, bounded as a whole: on a hung server the
			// sweep fails and the next one reconnects.
			cctx, cancel := context.WithTimeout(ctx, postgres.CallTimeout)
			rs, err := s.ExpireDue(cctx, batch)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.ErrorContext(ctx, "expiry sweep failed", "err", err)
				}
				return
			}
			if len(rs) > 0 {
				log.InfoContext(ctx, "reservations expired", "expired", len(rs))
				if expired != nil {
					expired(rs)
				}
			}
			if len(rs) < batch {
				return
			}
		}
	})
}
