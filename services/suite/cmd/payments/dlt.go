package main

import (
	"context"
	"io"

	"github.com/paysuite/payments/pkg/dlt"
)

// dltCommand is "payments dlt list|replay", the DLT tooling of pkg/dlt.
func dltCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return dlt.Command(ctx, args, stdout, getenv)
}
