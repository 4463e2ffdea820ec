package consumer

import (
	"context"
	"strconv"
	"time"

	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/periodic"
)

// lagInterval is how often the consumer lag gauge is refreshed.
const lagInterval = 5 * time.Second

// reportLag sets consumer_lag{group, topic, partition} to the partition's
// last stable offset minus the group's committed offset every lagInterval
// (broker.Admin.GroupLag): a stuck handler stops moving the committed
// offset, so its lag grows.
func (l *loop) reportLag(ctx context.Context) {
	adm, err := broker.NewAdmin(l.cfg.Broker)
	if err != nil {
		l.cfg.Logger.WarnContext(ctx, "no consumer lag metric", "group", l.group, "err", err)
		return
	}
	defer adm.Close()
	periodic.Every(ctx, periodic.Fixed(lagInterval), func() {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lags, err := adm.GroupLag(qctx, l.group, l.topics)
		cancel()
		if err != nil {
			return // the broker may be away; the gauge keeps its last value
		}
		for tp, lag := range lags {
			l.cfg.Metrics.Lag.WithLabelValues(l.group, tp.Topic, strconv.Itoa(int(tp.Partition))).Set(float64(lag))
		}
	})
}
