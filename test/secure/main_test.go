package secure_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
)

// sb is the package's secured broker: one per test binary (it takes some
// 20 s to start), with the suite's topics and ACLs.
var sb *kafkatest.SecuredBroker

// The users of the secured broker besides admin: the four services'
// principals and one with no ACL at all.
const (
	userTransfers     = "transfers"
	userAntifraud     = "antifraud"
	userLedger        = "ledger"
	userNotifications = "notifications"
	userNobody        = "nobody"
)

// partitions of the suite's topics on the secured broker: few, to keep the
// start quick.
const partitions = 3

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	b, err := kafkatest.StartSecured(ctx, userTransfers, userAntifraud, userLedger, userNotifications, userNobody)
	if err != nil {
		fmt.Fprintf(os.Stderr, "secure: cannot start the secured Kafka broker: %v\n", err)
		return 1
	}
	defer func() {
		if err := b.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "secure: stop the secured broker: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "secure: SASL_SSL broker at %s ready in %v\n", b.Addr, time.Since(start).Round(time.Millisecond))
	sb = b
	admin := b.Config(kafkatest.SecuredAdmin)
	specs := broker.SuiteTopics(events.DefaultTopics, 1)
	for i := range specs {
		specs[i].Partitions = partitions
	}
	if _, err := broker.CreateTopics(ctx, admin, specs); err != nil {
		fmt.Fprintf(os.Stderr, "secure: create the suite's topics: %v\n", err)
		return 1
	}
	acls := broker.SuiteACLs(events.DefaultTopics, broker.DefaultGroups, broker.DefaultPrincipals)
	if err := broker.CreateACLs(ctx, admin, acls); err != nil {
		fmt.Fprintf(os.Stderr, "secure: create the suite's ACLs: %v\n", err)
		return 1
	}
	// The authorizer applies new ACLs from the metadata log a moment
	// later; DescribeAcls answers from the same state, so wait for it.
	for {
		got, err := kafkatest.ListACLs(ctx, admin)
		if err == nil && len(got) == len(acls) {
			break
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "secure: the ACLs did not show (%d of %d, %v)\n", len(got), len(acls), err)
			return 1
		case <-time.After(100 * time.Millisecond):
		}
	}
	return m.Run()
}
