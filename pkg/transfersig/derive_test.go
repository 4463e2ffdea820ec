package transfersig_test

import (
	"bytes"
	"testing"

	"github.com/paysuite/payments/pkg/transfersig"
)

// TestDeriveKey: a derived key is 32 bytes, the same for the same signing
// key and purpose (every instance with the key derives it alike), and
// another for another purpose or another signing key.
func TestDeriveKey(t *testing.T) {
	t.Parallel()
	a, err := transfersig.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := transfersig.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	derive := func(s transfersig.Signer, purpose string) []byte {
		t.Helper()
		k, err := s.DeriveKey(purpose)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 32 {
			t.Fatalf("derived key of %d bytes, want 32", len(k))
		}
		return k
	}
	first := derive(a, "cursor")
	if !bytes.Equal(first, derive(a, "cursor")) {
		t.Error("the same key and purpose derive different keys")
	}
	if bytes.Equal(first, derive(a, "other")) {
		t.Error("two purposes derive the same key")
	}
	if bytes.Equal(first, derive(b, "cursor")) {
		t.Error("two signing keys derive the same key")
	}
}
