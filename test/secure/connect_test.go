package secure_test

import (
	"context"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/broker"
)

func TestConnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := broker.Check(ctx, sb.Config(userLedger)); err != nil {
		t.Fatal(err)
	}
}
