package main

import "time"

// The warm-up goes on past -warmup in slices of jitSlice until the broker's
// JIT compiler threads take less than jitQuiet cores over one: a compiler
// still busy in the first step is charged to that step's transfers, and
// only to the relay measured first on a fresh broker.
const (
	jitSlice = 5 * time.Second
	jitQuiet = 0.02
)

// warmUp offers load for first, then for slice at a time while the JIT
// took at least quiet cores over the last slice and less than most has
// been offered in all. jit reads the compiler threads' CPU so far (the
// live threads': one that exits takes its time with it, and that slice
// reads low). It returns how long the load ran and the compiler's cores
// over the last load; with first 0 there is no warm-up at all.
func warmUp(first, most, slice time.Duration, quiet float64, load func(time.Duration), jit func() time.Duration) (time.Duration, float64) {
	if first <= 0 {
		return 0, 0
	}
	before := jit()
	load(first)
	took, last := first, (jit()-before).Seconds()/first.Seconds()
	for last >= quiet && took+slice <= most {
		before = jit()
		load(slice)
		took, last = took+slice, (jit()-before).Seconds()/slice.Seconds()
	}
	return took, last
}
