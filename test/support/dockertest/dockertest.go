// Package dockertest is what pgtest and kafkatest share when they start
// their servers in containers: the check that a Docker engine answers.
package dockertest

import (
	"context"
	"errors"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
)

// Healthy reports whether a Docker engine answers. testcontainers can panic
// while looking for one; that counts as "no", with the panic as the error.
func Healthy(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	if p == nil {
		return errors.New("no container provider")
	}
	return p.Health(ctx)
}
