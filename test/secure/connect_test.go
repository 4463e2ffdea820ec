package secure_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/test/support/kafkatest"
	"github.com/paysuite/payments/test/support/tlstest"
)

// kgoClient is a franz-go client with cfg's brokers and security options,
// as the kgo consumers build theirs.
func kgoClient(tb testing.TB, cfg broker.Config, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	sec, err := cfg.KgoSecurityOpts()
	if err != nil {
		tb.Fatalf("KgoSecurityOpts: %v", err)
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RetryTimeout(5 * time.Second)}, sec...)
	c, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		tb.Fatalf("kgo client: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

func ctx30(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// Every mechanism of KAFKA_SASL_MECHANISM connects, with both clients.
func TestMechanisms(t *testing.T) {
	for _, mech := range []string{broker.MechanismScramSHA512, broker.MechanismScramSHA256, broker.MechanismPlain} {
		t.Run(mech, func(t *testing.T) {
			cfg := sb.ConfigWith(mech, userLedger, sb.Passwords[userLedger])
			if err := broker.Check(ctx30(t), cfg); err != nil {
				t.Errorf("kafka-go: %v", err)
			}
			if err := kgoClient(t, cfg).Ping(ctx30(t)); err != nil {
				t.Errorf("kgo: %v", err)
			}
		})
	}
}

// A wrong password is refused at connect, with an error that says so.
func TestWrongPasswordIsRefused(t *testing.T) {
	for _, mech := range []string{broker.MechanismScramSHA512, broker.MechanismPlain} {
		t.Run(mech, func(t *testing.T) {
			cfg := sb.ConfigWith(mech, userLedger, "not-the-password")
			err := broker.Check(ctx30(t), cfg)
			if !errors.Is(err, kafka.SASLAuthenticationFailed) {
				t.Errorf("kafka-go: err = %v, want SASL Authentication Failed", err)
			}
			err = kgoClient(t, cfg).Ping(ctx30(t))
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("kgo: err = %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			// The suite's producer fails the same way, on its first write.
			err = produce(cfg, kafka.Message{Topic: events.DLT(events.DefaultTopics.Analysed), Value: []byte("x")})
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("producer: err = %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

// A client that does not trust the broker's CA stops at the TLS handshake
// with a certificate error, before it sends its credential.
func TestTLSWithWrongCAFails(t *testing.T) {
	other := tlstest.NewCA(t, "not-the-broker-ca")
	cfg := sb.Config(userLedger)
	wrong, err := broker.LoadTLS(other.CertFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Security.TLS = wrong
	var unknown x509.UnknownAuthorityError
	if err := broker.Check(ctx30(t), cfg); !errors.As(err, &unknown) {
		t.Errorf("kafka-go: err = %v, want x509.UnknownAuthorityError", err)
	} else if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("kafka-go: the error does not say why: %v", err)
	}
	if err := kgoClient(t, cfg).Ping(ctx30(t)); !errors.As(err, &unknown) {
		t.Errorf("kgo: err = %v, want x509.UnknownAuthorityError", err)
	}
	// Without TLS at all, the SASL_SSL listener answers nothing useful.
	cfg.Security.TLS = nil
	if err := broker.Check(ctx30(t), cfg); err == nil {
		t.Error("a plaintext client connected to the SASL_SSL listener")
	}
	// The right CA but another name than the certificate's.
	cfg = sb.Config(userLedger)
	cfg.Security.TLS = cfg.Security.TLS.Clone()
	cfg.Security.TLS.ServerName = "kafka.example.com"
	var hostErr x509.HostnameError
	if err := broker.Check(ctx30(t), cfg); !errors.As(err, &hostErr) {
		t.Errorf("kafka-go with a wrong server name: err = %v, want x509.HostnameError", err)
	}
}

// TestACLsAreIdempotent: creating the suite's ACLs again (TestMain made
// them once) changes nothing, and the cluster holds exactly them.
func TestACLsAreIdempotent(t *testing.T) {
	admin := sb.Config(kafkatest.SecuredAdmin)
	want := broker.SuiteACLs(events.DefaultTopics, broker.DefaultGroups, broker.DefaultPrincipals)
	if err := broker.CreateACLs(ctx30(t), admin, want); err != nil {
		t.Fatalf("second CreateACLs: %v", err)
	}
	got, err := kafkatest.ListACLs(ctx30(t), admin)
	if err != nil {
		t.Fatal(err)
	}
	broker.SortACLs(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ACLs on the cluster mismatch (-want +got):\n%s", diff)
	}
	// Only an admin may create ACLs.
	err = broker.CreateACLs(ctx30(t), sb.Config(userLedger), []broker.ACL{{
		Principal: "User:" + userLedger, Resource: broker.ResourceTopic, Name: events.DefaultTopics.Analysed, Operation: broker.OpWrite,
	}})
	if !errors.Is(err, kafka.ClusterAuthorizationFailed) {
		t.Errorf("the ledger granted itself analisada: err = %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

// TestWritesOnlyWhereGranted: each principal writes its own topics and no
// other; the produce request goes straight to the partition leader, so the
// answer is the broker's. (Allowed writes go to dead-letter topics that no
// running test consumes.)
func TestWritesOnlyWhereGranted(t *testing.T) {
	tp := events.DefaultTopics
	tests := []struct {
		user, topic string
		allowed     bool
	}{
		{userLedger, tp.Analysed, false},
		{userLedger, tp.Requested, false},
		{userLedger, events.DLT(tp.Requested), false},
		{userTransfers, tp.Settled, false},
		{userTransfers, tp.Rejected, false},
		{userAntifraud, tp.Settled, false},
		{userNotifications, tp.Settled, false},
		{userNotifications, tp.Rejected, false},
		{userNobody, events.DLT(tp.Settled), false},
		// Holds: only the ledger writes reservada and cancelada, only
		// transfers the commands.
		{userTransfers, tp.Reserved, false},
		{userTransfers, tp.Cancelled, false},
		{userAntifraud, tp.Reserved, false},
		{userNotifications, tp.Cancelled, false},
		{userLedger, tp.CaptureRequested, false},
		{userLedger, tp.CancelRequested, false},
		{userAntifraud, tp.CaptureRequested, false},
		{userNotifications, tp.CancelRequested, false},
		{userTransfers, events.DLT(tp.CaptureRequested), false},
		{userLedger, events.DLT(tp.CaptureRequested), true},
		{userLedger, events.DLT(tp.CancelRequested), true},
		{userTransfers, events.DLT(tp.Reserved), true},
		{userNotifications, events.DLT(tp.Cancelled), true},
		{userAntifraud, events.DLT(tp.Requested), true},
		{userTransfers, events.DLT(tp.Settled), true},
		{userNotifications, events.DLT(tp.Rejected), true},
		// Refunds: only transfers writes estorno.solicitado, only the
		// ledger the results.
		{userLedger, tp.RefundRequested, false},
		{userAntifraud, tp.RefundRequested, false},
		{userNotifications, tp.RefundRequested, false},
		{userTransfers, tp.RefundSettled, false},
		{userTransfers, tp.RefundRejected, false},
		{userAntifraud, tp.RefundSettled, false},
		{userNotifications, tp.RefundRejected, false},
		{userNobody, tp.RefundRequested, false},
		{userLedger, events.DLT(tp.RefundRequested), true},
		{userTransfers, events.DLT(tp.RefundRequested), false},
		{userNotifications, events.DLT(tp.RefundSettled), true},
	}
	for _, tt := range tests {
		t.Run(tt.user+" writes "+tt.topic, func(t *testing.T) {
			err := produceRaw(sb.Config(tt.user), tt.topic, 0, kafka.Message{Key: []byte("k"), Value: []byte(`{}`)})
			switch {
			case tt.allowed && err != nil:
				t.Errorf("refused: %v", err)
			case !tt.allowed && !errors.Is(err, kafka.TopicAuthorizationFailed):
				t.Errorf("err = %v, want TOPIC_AUTHORIZATION_FAILED", err)
			}
		})
	}
}

// TestKgoClientsWithTheServicesPrincipals: the franz-go options of
// KgoSecurityOpts produce (idempotent, kgo's default: no cluster ACL is
// needed) and consume in a group as the ACLs allow, and a group the
// principal may not use is refused.
func TestKgoClientsWithTheServicesPrincipals(t *testing.T) {
	dlt := events.DLT(events.DefaultTopics.Analysed)
	value := []byte(shortID())
	p := kgoClient(t, sb.Config(userLedger), kgo.DefaultProduceTopic(dlt))
	if err := p.ProduceSync(ctx30(t), &kgo.Record{Key: []byte("k"), Value: value}).FirstErr(); err != nil {
		t.Fatalf("ledger produces to %s: %v", dlt, err)
	}
	// A group of another name than the ledger's is refused.
	c := kgoClient(t, sb.Config(userLedger), kgo.ConsumeTopics(dlt), kgo.ConsumerGroup(broker.DefaultGroups.LedgerDLTMonitor+"-kgo-"+shortID()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := c.PollFetches(ctx30(t))
	if err := fetches.Err(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("ledger in a group of another name: err = %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	// The ledger's DLT monitor group may read the record back.
	ok := kgoClient(t, sb.Config(userLedger), kgo.ConsumeTopics(dlt), kgo.ConsumerGroup(broker.DefaultGroups.LedgerDLTMonitor),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	found := false
	ctx := ctx30(t)
	for !found {
		fetches := ok.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the ledger's DLT monitor group did not read the record: %v", err)
		}
		if err := fetches.Err(); err != nil {
			t.Fatalf("ledger reads %s in %s: %v", dlt, broker.DefaultGroups.LedgerDLTMonitor, err)
		}
		fetches.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == string(value) })
	}
	// The ledger may not read solicitada, even in its own group.
	denied := kgoClient(t, sb.Config(userLedger), kgo.ConsumeTopics(events.DefaultTopics.Requested),
		kgo.ConsumerGroup(broker.DefaultGroups.Ledger))
	if err := denied.PollFetches(ctx30(t)).Err(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("ledger reads solicitada: err = %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// The ledger's principal reads analisada but may not write it: the suite's
// own producer, with the ledger's credential, gets TOPIC_AUTHORIZATION_FAILED.
func TestLedgerCannotWriteAnalisada(t *testing.T) {
	err := produce(sb.Config(userLedger), kafka.Message{
		Topic: events.DefaultTopics.Analysed, Key: []byte("CC-001"), Value: []byte(`{}`),
	})
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("err = %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The same producer writes the ledger's own topic.
	if err := produce(sb.Config(userLedger), kafka.Message{
		Topic: events.DLT(events.DefaultTopics.Analysed), Key: []byte("CC-001"), Value: []byte(`{}`),
	}); err != nil {
		t.Errorf("ledger writes its DLT: %v", err)
	}
}
