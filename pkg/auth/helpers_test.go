package auth_test

import (
	"slices"

	"github.com/google/go-cmp/cmp"
)

var cmpSorted = cmp.Transformer("sorted", func(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
})
