package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/events"
)

// Principals are the Kafka principals of the four services, one each
// ("User:<SASL user name>"), so that each may do only what CONTRACTS.md
// sections 3 and 8 give it.
type Principals struct {
	Transfers, Antifraud, Ledger, Notifications string
}

// DefaultPrincipals are the principals of the deploy manifests: the SASL
// user of a service is its name.
var DefaultPrincipals = Principals{
	Transfers: "User:transfers", Antifraud: "User:antifraud", Ledger: "User:ledger", Notifications: "User:notifications",
}

// Groups are the consumer groups of CONTRACTS.md section 3.
type Groups struct {
	Projection       string // transfers' status projection
	Antifraud        string
	Ledger           string
	LedgerCommands   string // the ledger's captures and cancellations of holds
	LedgerRefunds    string // the ledger's refunds
	LedgerDLTMonitor string
	// Notifications is the group of the main topics; its retry topics are
	// read by "<group>-retry-<ms>" (NotificationRetryGroups).
	Notifications string
}

// DefaultGroups are the groups of CONTRACTS.md section 3 (each service's
// own constant is the same name; services/suite tests that they agree).
var DefaultGroups = Groups{
	Projection: "transferencias-projecao", Antifraud: "antifraude", Ledger: "ledger",
	LedgerCommands: "ledger-comandos", LedgerRefunds: "ledger-estornos", LedgerDLTMonitor: "ledger-dlt-monitor",
	Notifications: "notificacoes",
}

// NotificationRetryGroups are the groups that read the retry topics of the
// notifications group g, one per RetryDelays entry.
func NotificationRetryGroups(g string) []string {
	out := make([]string, len(RetryDelays))
	for i, d := range RetryDelays {
		out[i] = g + "-retry-" + strconv.FormatInt(d.Milliseconds(), 10)
	}
	return out
}

// ACL operations and resource kinds the suite grants.
const (
	OpRead  = "READ"
	OpWrite = "WRITE"

	ResourceTopic = "TOPIC"
	ResourceGroup = "GROUP"
)

// ACL allows Principal to do Operation on the resource named Name (a
// literal name, never a prefix or a wildcard), from any host.
type ACL struct {
	Principal string
	Resource  string // ResourceTopic or ResourceGroup
	Name      string
	Operation string // OpRead or OpWrite (which imply DESCRIBE)
}

func (a ACL) String() string {
	return fmt.Sprintf("%s %s %s:%s", a.Principal, a.Operation, strings.ToLower(a.Resource), a.Name)
}

// SuiteACLs are the least-privilege ACLs of the suite: each service reads
// only the topics it consumes (with its own groups) and writes only its own
// topics, its dead-letter topics and (notifications) its retry topics. Only
// antifraud writes analisada; only antifraud and the ledger write
// rejeitada; only the ledger writes liquidada, reservada and cancelada;
// only transfers writes the commands on holds (captura-solicitada and
// cancelamento-solicitado) and the refunds (estorno-solicitado), which
// only the ledger reads; only the ledger writes the refunds' results
// (estorno.liquidado and estorno.rejeitado). No principal gets a cluster
// permission: the producers are not idempotent (kafka-go), and a kgo
// consumer never produces; since Kafka 3.0 WRITE on a topic is also enough
// for an idempotent producer (KIP-679).
func SuiteACLs(t events.Topics, g Groups, p Principals) []ACL {
	var out []ACL
	add := func(principal, resource, op string, names ...string) {
		for _, n := range names {
			out = append(out, ACL{Principal: principal, Resource: resource, Name: n, Operation: op})
		}
	}
	results := ResultTopics(t)
	resultDLTs := make([]string, len(results))
	for i, r := range results {
		resultDLTs[i] = events.DLT(r)
	}
	// transfers: the outbox relay writes solicitada, the commands on
	// holds and the refunds; the projection reads the results and
	// dead-letters what it cannot apply.
	add(p.Transfers, ResourceTopic, OpWrite, t.Requested, t.CaptureRequested, t.CancelRequested, t.RefundRequested)
	add(p.Transfers, ResourceTopic, OpWrite, resultDLTs...)
	add(p.Transfers, ResourceTopic, OpRead, results...)
	add(p.Transfers, ResourceGroup, OpRead, g.Projection)
	// antifraud: reads solicitada, decides into analisada or rejeitada.
	add(p.Antifraud, ResourceTopic, OpWrite, t.Analysed, t.Rejected, events.DLT(t.Requested))
	add(p.Antifraud, ResourceTopic, OpRead, t.Requested)
	add(p.Antifraud, ResourceGroup, OpRead, g.Antifraud)
	// ledger: settles analisada into liquidada, rejeitada or reservada,
	// closes holds on the commands into liquidada or cancelada, decides
	// refunds into estorno.liquidado or estorno.rejeitado; its DLT
	// monitor reads the DLTs of the topics it reads.
	ledgerDLTs := []string{events.DLT(t.Analysed), events.DLT(t.CaptureRequested), events.DLT(t.CancelRequested),
		events.DLT(t.RefundRequested)}
	add(p.Ledger, ResourceTopic, OpWrite, t.Settled, t.Rejected, t.Reserved, t.Cancelled, t.RefundSettled, t.RefundRejected)
	add(p.Ledger, ResourceTopic, OpWrite, ledgerDLTs...)
	add(p.Ledger, ResourceTopic, OpRead, t.Analysed, t.CaptureRequested, t.CancelRequested, t.RefundRequested)
	add(p.Ledger, ResourceTopic, OpRead, ledgerDLTs...)
	add(p.Ledger, ResourceGroup, OpRead, g.Ledger, g.LedgerCommands, g.LedgerRefunds, g.LedgerDLTMonitor)
	// notifications: reads the results, retries through its retry
	// topics, dead-letters after the last, and reads its DLTs (its
	// operator endpoints list them and check a replay against them).
	var retries []string
	for _, main := range results {
		for _, d := range RetryDelays {
			retries = append(retries, RetryTopic(main, d))
		}
	}
	add(p.Notifications, ResourceTopic, OpWrite, retries...)
	add(p.Notifications, ResourceTopic, OpWrite, resultDLTs...)
	add(p.Notifications, ResourceTopic, OpRead, results...)
	add(p.Notifications, ResourceTopic, OpRead, retries...)
	add(p.Notifications, ResourceTopic, OpRead, resultDLTs...)
	add(p.Notifications, ResourceGroup, OpRead, g.Notifications)
	add(p.Notifications, ResourceGroup, OpRead, NotificationRetryGroups(g.Notifications)...)
	return out
}

// CreateACLs creates acls on the cluster with the admin credential of cfg
// (a super user, or a principal with ALTER on the cluster). ACLs that
// exist already stay as they are, so running it twice changes nothing.
// ACLs not in acls are left alone: revoking is an operator's decision.
func CreateACLs(ctx context.Context, cfg Config, acls []ACL) error {
	req := &kafka.CreateACLsRequest{}
	for _, a := range acls {
		e, err := a.entry()
		if err != nil {
			return err
		}
		req.ACLs = append(req.ACLs, e)
	}
	transport := cfg.Transport()
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second, Transport: transport}
	resp, err := client.CreateACLs(ctx, req)
	if err != nil {
		return fmt.Errorf("create ACLs: %w", err)
	}
	var errs []error
	for i, err := range resp.Errors {
		if err != nil && i < len(acls) {
			errs = append(errs, fmt.Errorf("ACL %s: %w", acls[i], err))
		}
	}
	return errors.Join(errs...)
}

// SortACLs orders acls by principal, resource kind, name and operation.
func SortACLs(acls []ACL) {
	slices.SortFunc(acls, func(a, b ACL) int {
		return strings.Compare(a.Principal+"\x00"+a.Resource+"\x00"+a.Name+"\x00"+a.Operation,
			b.Principal+"\x00"+b.Resource+"\x00"+b.Name+"\x00"+b.Operation)
	})
}

// aclResources and aclOperations are the Kafka values of an ACL's
// Resource and Operation.
var (
	aclResources  = map[string]kafka.ResourceType{ResourceTopic: kafka.ResourceTypeTopic, ResourceGroup: kafka.ResourceTypeGroup}
	aclOperations = map[string]kafka.ACLOperationType{OpRead: kafka.ACLOperationTypeRead, OpWrite: kafka.ACLOperationTypeWrite}
)

func (a ACL) entry() (kafka.ACLEntry, error) {
	e := kafka.ACLEntry{
		ResourceName:        a.Name,
		ResourcePatternType: kafka.PatternTypeLiteral,
		Principal:           a.Principal,
		Host:                "*",
		PermissionType:      kafka.ACLPermissionTypeAllow,
	}
	var ok bool
	if e.ResourceType, ok = aclResources[a.Resource]; !ok {
		return e, fmt.Errorf("ACL %s: unknown resource kind", a)
	}
	if e.Operation, ok = aclOperations[a.Operation]; !ok {
		return e, fmt.Errorf("ACL %s: unknown operation", a)
	}
	if !strings.HasPrefix(a.Principal, "User:") || len(a.Principal) == len("User:") {
		return e, fmt.Errorf("ACL %s: the principal must read User:<name>", a)
	}
	if a.Name == "" {
		return e, fmt.Errorf("ACL %s: empty resource name", a)
	}
	return e, nil
}
