package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/paysuite/payments/pkg/broker"
)

// ListACLs returns the literal allow ACLs of the cluster cfg reaches on
// topics and groups, sorted (broker.SortACLs): what the secured-broker
// tests compare with the ACLs they created.
func ListACLs(ctx context.Context, cfg broker.Config) ([]broker.ACL, error) {
	transport := cfg.Transport()
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second, Transport: transport}
	resp, err := client.DescribeACLs(ctx, &kafka.DescribeACLsRequest{Filter: kafka.ACLFilter{
		ResourceTypeFilter:        kafka.ResourceTypeAny,
		ResourcePatternTypeFilter: kafka.PatternTypeLiteral,
		Operation:                 kafka.ACLOperationTypeAny,
		PermissionType:            kafka.ACLPermissionTypeAllow,
	}})
	if err != nil {
		return nil, fmt.Errorf("describe ACLs: %w", err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("describe ACLs: %w", resp.Error)
	}
	var out []broker.ACL
	for _, r := range resp.Resources {
		var kind string
		switch r.ResourceType {
		case kafka.ResourceTypeTopic:
			kind = broker.ResourceTopic
		case kafka.ResourceTypeGroup:
			kind = broker.ResourceGroup
		default:
			continue
		}
		for _, d := range r.ACLs {
			op := strings.ToUpper(d.Operation.String())
			out = append(out, broker.ACL{Principal: d.Principal, Resource: kind, Name: r.ResourceName, Operation: op})
		}
	}
	broker.SortACLs(out)
	return out, nil
}
