// Command checkhistory runs the history checker on a saved history (the
// history.jsonl a fault test wrote next to its logs) and prints its table:
//
//	go run ./test/chaos/history/cmd/checkhistory path/to/history.jsonl
//
// It exits 1 on any anomaly, 2 when the history cannot be read or checked.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/paysuite/payments/test/chaos/history"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: checkhistory HISTORY.jsonl")
		return 2
	}
	h, err := history.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	rep, err := history.Check(h)
	fmt.Fprint(stdout, rep.Table())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
