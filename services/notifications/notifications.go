// Package notifications is the notifications service: it consumes the
// transfer results (liquidada, rejeitada, and a hold's reservada and
// cancelada) and the refund results (estorno.liquidado,
// estorno.rejeitado) in consumer group "notificacoes"
// and tells each customer through a channel, a signed webhook or the log,
// once per result event. Failed sends go through retry topics (1 s, 2 s,
// 4 s) and then the DLT, without holding up the main topics; see
// CONTRACTS.md section 7.
package notifications

import (
	"context"
	"log/slog"
	"net"
	"slices"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/events"
	"github.com/paysuite/payments/pkg/opsapi"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	pg "github.com/paysuite/payments/pkg/postgres"
	"github.com/paysuite/payments/services/notifications/internal/channels"
	"github.com/paysuite/payments/services/notifications/internal/consume"
	"github.com/paysuite/payments/services/notifications/internal/notify"
	"github.com/paysuite/payments/services/notifications/internal/opsweb"
	"github.com/paysuite/payments/services/notifications/internal/postgres"
)

// Service is the service's name: its logs and its migration set.
const Service = "notifications"

// DefaultGroup is the consumer group of CONTRACTS.md section 3.
const DefaultGroup = "notificacoes"

// notifyBatchMax is the most records of one fetch notified together.
const notifyBatchMax = 100

// Run runs the service with cfg, as ConfigFromEnv gives it (Run checks
// nothing again), and log (platform.Main reads them and starts tracing)
// until ctx is cancelled. It builds, in order, the metrics
// registry and the authenticator, the pool and its migrations, the Kafka
// producer, the outbox and its relay, the sender and the notifications
// service, the consumer of the result topics and their retry topics, and
// the router (health, metrics, operator routes); platform.Serve runs them
// and stops them in its stated order, and the defers close the producer,
// the pool and the authenticator. listening, if not nil, receives the HTTP
// address once bound.
func Run(ctx context.Context, cfg Config, log *slog.Logger, listening func(net.Addr)) error {
	log = log.With("service", cfg.Service)
	reg := platform.NewRegistry()
	// The authenticator first: a JWKS that cannot be read stops the
	// start before any connection is opened.
	authn, err := platform.NewAuthenticator(ctx, cfg.Config, log, reg)
	if err != nil {
		return err
	}
	defer platform.Close(log, "authenticator", func() error { return authn.Close(context.WithoutCancel(ctx)) })

	db, err := platform.OpenPool(ctx, cfg.Config)
	if err != nil {
		return err
	}
	defer db.Close()
	if cfg.MigrateOnStart {
		if err := platform.Migrate(ctx, db, cfg.Service); err != nil {
			return err
		}
	}

	producer, err := platform.NewProducer(cfg.Config)
	if err != nil {
		return err
	}
	defer platform.Close(log, "kafka producer", producer.Close)

	ob := outbox.New(db)
	relay, err := platform.NewRelay(cfg.Config, db, ob, producer, log, reg)
	if err != nil {
		return err
	}

	var sender notify.Sender
	switch cfg.Channel {
	case ChannelWebhook:
		sender = channels.NewWebhook(cfg.Webhook.channel())
	default:
		sender = channels.NewLog(log)
	}
	svc := notify.NewService(postgres.New(db), sender, notify.NewMetrics(reg), log)

	handler := consume.NewHandler(svc, cfg.Topics)
	notifyCfg := consumer.Config{Broker: cfg.Kafka, Group: cfg.Group, Topics: Consumed(cfg.Topics),
		Policy: consumer.DelayedRetryTopics, Logger: log, Metrics: consumer.NewMetrics(reg),
		// The records of one topic fetched together are notified with
		// their log entries claimed and recorded at once.
		Handler: handler.Handle, MaxBatch: notifyBatchMax}

	ready := platform.NewReadiness(cfg.Service, db, producer, log, reg)
	router := platform.NewRouter(cfg.Config, log, reg, ready, authn)
	var dlts []string
	for _, t := range Consumed(cfg.Topics) {
		dlts = append(dlts, events.DLT(t))
	}
	auth.Mount(router, log, opsRoutes(ob, db, cfg.Kafka, dlts, log))

	names := make([]string, len(cfg.Webhook.Destinations))
	for i, d := range cfg.Webhook.Destinations {
		names[i] = d.Name
	}
	log.InfoContext(ctx, "notifications starting", "channel", cfg.Channel, "group", cfg.Group,
		"webhook_destinations", names, "default_url", cfg.Webhook.Default.URL != "")
	return platform.Serve(ctx, cfg.Config, log, listening, platform.Parts{
		Router:    router,
		Readiness: ready,
		Relay:     relay,
		Tasks:     []platform.Task{func(ctx context.Context) error { return consumer.Run(ctx, notifyCfg) }},
	})
}

// Consumed returns the main topics the service reads of t: the results it
// notifies (liquidada, rejeitada, reservada, cancelada, and a refund's
// estorno.liquidado and estorno.rejeitado). Each has its retry topics and
// its DLT, which the service writes.
func Consumed(t events.Topics) []string {
	return []string{t.Settled, t.Rejected, t.Reserved, t.Cancelled, t.RefundSettled, t.RefundRejected}
}

// opsRoutes are the operator routes (scope operacoes): the shared outbox
// and dead-letter ones (on the DLTs the service writes) and the
// notifications of a transfer; ob and db may be nil (a test's router).
func opsRoutes(ob *outbox.Outbox, db *pg.DB, kcfg broker.Config, dlts []string, log *slog.Logger) []auth.Route {
	var store opsweb.Store
	if db != nil {
		store = postgres.New(db)
	}
	return slices.Concat(opsapi.Routes(ob, log), opsapi.DLTRoutes(kcfg, dlts, log), opsweb.Routes(store, log))
}
