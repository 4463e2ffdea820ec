// Package migrations embeds the goose SQL migrations of every database in the
// suite and applies them.
//
// Each service owns one database. Every database gets the platform set (the
// outbox and inbox tables, defined once here) and then the service's own set.
// Each set keeps its version in its own goose table, so the two sets evolve
// independently.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

//go:embed */*.sql
var embedded embed.FS

// Set is one folder of goose migrations and the table that records its version.
type Set struct {
	// Name is the folder under migrations/.
	Name string
	// Table is the goose version table of this set.
	Table string
}

// Platform is the set every service database gets: outbox and inbox.
var Platform = Set{Name: "platform", Table: "goose_platform_version"}

// ForService returns the sets a service's database needs, in order.
func ForService(service string) []Set {
	return []Set{Platform, {Name: service, Table: "goose_" + service + "_version"}}
}

// Apply runs every pending migration of the given sets, in order, on db.
func Apply(ctx context.Context, db *sql.DB, sets ...Set) error {
	for _, s := range sets {
		p, err := provider(db, s)
		if err != nil {
			return err
		}
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", s.Name, err)
		}
	}
	return nil
}

// ApplyTo runs the pending migrations of set s up to and including
// version, on db: how a test builds a database as an older release left it
// before it fills it and runs the rest.
func ApplyTo(ctx context.Context, db *sql.DB, s Set, version int64) error {
	p, err := provider(db, s)
	if err != nil {
		return err
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate %s to %d: %w", s.Name, version, err)
	}
	return nil
}

// Pending reports whether any of the sets has a migration not yet applied.
func Pending(ctx context.Context, db *sql.DB, sets ...Set) (bool, error) {
	for _, s := range sets {
		p, err := provider(db, s)
		if err != nil {
			return false, err
		}
		has, err := p.HasPending(ctx)
		if err != nil {
			return false, fmt.Errorf("check migrations %s: %w", s.Name, err)
		}
		if has {
			return true, nil
		}
	}
	return false, nil
}

func provider(db *sql.DB, s Set) (*goose.Provider, error) {
	sub, err := fs.Sub(embedded, s.Name)
	if err != nil {
		return nil, fmt.Errorf("migrations %s: %w", s.Name, err)
	}
	store, err := database.NewStore(goose.DialectPostgres, s.Table)
	if err != nil {
		return nil, fmt.Errorf("goose store %s: %w", s.Name, err)
	}
	// A session advisory lock: several instances starting at once (pods,
	// init containers) migrate one after the other.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("goose locker: %w", err)
	}
	p, err := goose.NewProvider("", db, sub, goose.WithStore(store), goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("goose provider %s: %w", s.Name, err)
	}
	return p, nil
}
