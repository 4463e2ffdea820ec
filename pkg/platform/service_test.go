package platform_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/broker"
	"github.com/paysuite/payments/pkg/consumer"
	"github.com/paysuite/payments/pkg/outbox"
	"github.com/paysuite/payments/pkg/platform"
	"github.com/paysuite/payments/pkg/postgres"
)

// service is what a service's run builds with the platform's pieces, in
// the run's order (the authenticator first); run serves it and closes it as the run's defers do.
type service struct {
	cfg      platform.Config
	log      *slog.Logger
	reg      *prometheus.Registry
	db       *postgres.DB
	producer *broker.Producer
	outbox   *outbox.Outbox
	relay    platform.Relay
	metrics  *consumer.Metrics
	ready    *platform.Readiness
	authn    *auth.Authenticator
	router   chi.Router

	closeOnce sync.Once
}

// openService builds a service from cfg the way a service's run does; the
// caller closes it (run does).
func openService(ctx context.Context, cfg platform.Config, log *slog.Logger) (*service, error) {
	s := &service{cfg: cfg, log: log.With("service", cfg.Service), reg: platform.NewRegistry()}
	var err error
	if s.authn, err = platform.NewAuthenticator(ctx, cfg, s.log, s.reg); err != nil {
		return nil, err
	}
	if s.db, err = platform.OpenPool(ctx, cfg); err != nil {
		s.closeAuth()
		return nil, err
	}
	if cfg.MigrateOnStart {
		if err := platform.Migrate(ctx, s.db, cfg.Service); err != nil {
			s.db.Close()
			s.closeAuth()
			return nil, err
		}
	}
	if s.producer, err = platform.NewProducer(cfg); err != nil {
		s.db.Close()
		s.closeAuth()
		return nil, err
	}
	s.outbox = outbox.New(s.db)
	if s.relay, err = platform.NewRelay(cfg, s.db, s.outbox, s.producer, s.log, s.reg); err != nil {
		s.close()
		return nil, err
	}
	s.metrics = consumer.NewMetrics(s.reg)
	s.ready = platform.NewReadiness(cfg.Service, s.db, s.producer, s.log, s.reg)
	s.router = platform.NewRouter(cfg, s.log, s.reg, s.ready, s.authn)
	return s, nil
}

// consumer is a consumer config with the service's brokers, logger and
// metrics, as a service's run writes it.
func (s *service) consumer(group string, topics []string, h consumer.Handler, policy consumer.Policy) consumer.Config {
	return consumer.Config{Broker: s.cfg.Kafka, Group: group, Topics: topics, Handler: h, Policy: policy, Logger: s.log, Metrics: s.metrics}
}

// run is the end of a service's run: Serve, then the closes.
func (s *service) run(ctx context.Context, listening func(net.Addr), consumers ...platform.Task) error {
	defer s.close()
	return platform.Serve(ctx, s.cfg, s.log, listening, platform.Parts{
		Router: s.router, Readiness: s.ready, Relay: s.relay, Tasks: consumers})
}

// close closes what openService opened in the other order: the
// producer, the pool, then the authenticator.
func (s *service) close() {
	s.closeOnce.Do(func() {
		platform.Close(s.log, "kafka producer", s.producer.Close)
		s.db.Close()
		s.closeAuth()
	})
}

func (s *service) closeAuth() {
	platform.Close(s.log, "authenticator", func() error { return s.authn.Close(context.Background()) })
}

// mustOpenService is openService failing tb, closed when the test ends.
func mustOpenService(tb testing.TB, cfg platform.Config, log *slog.Logger) *service {
	tb.Helper()
	s, err := openService(context.Background(), cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.close)
	return s
}
