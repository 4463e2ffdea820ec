package auth_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/auth"
)

var cmpSorted = cmp.Transformer("sorted", func(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
})

// newVerifier returns a verifier of cfg living as long as ctx, closed when
// the test ends.
func newVerifier(tb testing.TB, ctx context.Context, cfg auth.Config) *auth.Verifier {
	tb.Helper()
	v, err := auth.NewVerifier(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = v.Close(context.Background()) })
	return v
}
