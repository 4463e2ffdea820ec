package pgtest

import (
	"context"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/paysuite/payments/test/support/dockertest"
)

// startContainer starts ContainerImage and returns its URL. The container
// outlives the test that asked first and serves the whole test process;
// testcontainers' reaper (Ryuk) removes it when the process exits.
func startContainer(ctx context.Context) (dsn string, err error) {
	if err := dockertest.Healthy(ctx); err != nil {
		return "", fmt.Errorf("no Docker engine: %w", err)
	}
	c, err := tcpostgres.Run(ctx, ContainerImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
		// Throwaway test data: trade durability for speed, as with-infra.sh does.
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=500"),
	)
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.WithoutCancel(ctx))
		}
		return "", fmt.Errorf("start %s: %w", ContainerImage, err)
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}
