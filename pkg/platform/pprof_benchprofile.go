//go:build benchprofile

package platform

import (
	"net/http"
	_ "net/http/pprof" //nolint:gosec // built only with -tags benchprofile, for the bench's profiles
	"os"
)

// With the build tag benchprofile (test/benche2e -profile builds the
// binaries so; no other build has it), a process serves net/http/pprof on
// PPROF_ADDR, so that the whole-flow bench can take CPU and heap profiles
// of each service under load. Production binaries have no such listener.
func init() {
	addr := os.Getenv("PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() {
		_ = http.ListenAndServe(addr, nil) //nolint:gosec // a loopback debug listener of bench builds only
	}()
}
