package auth_test

import (
	"context"
	"testing"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/auth/authtest"
)

// BenchmarkVerify is one token's verification with the cache warm
// (cached) and with the cache off (uncached: parse, signature, claims).
func BenchmarkVerify(b *testing.B) {
	iss := authtest.New(b)
	tok := iss.Token(b, "bench", auth.ScopeTransfersCreate)
	for _, tc := range []struct {
		name string
		size int
	}{{"cached", auth.DefaultTokenCacheSize}, {"uncached", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := iss.Config()
			cfg.TokenCacheSize = tc.size
			v := newVerifier(b, context.Background(), cfg)
			ctx := context.Background()
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
