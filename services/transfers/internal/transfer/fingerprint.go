package transfer

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// canonical is a fingerprint being made: the SHA-256 of strings, each
// length-prefixed, and integers, 8 bytes big-endian, in the order written,
// so that no two different sequences of fields hash the same bytes.
type canonical struct{ h hash.Hash }

func newCanonical() canonical { return canonical{sha256.New()} }

func (c canonical) str(s string) {
	c.int(int64(len(s)))
	c.h.Write([]byte(s))
}

func (c canonical) int(v int64) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(v)) //nolint:gosec // a bit pattern, not arithmetic
	c.h.Write(n[:])
}

// optional writes *v, or -1 when v is nil (an amount not given: every
// amount written is positive).
func (c canonical) optional(v *int64) {
	if v == nil {
		c.int(-1)
		return
	}
	c.int(*v)
}

func (c canonical) sum() [32]byte {
	var sum [32]byte
	copy(sum[:], c.h.Sum(nil))
	return sum
}
