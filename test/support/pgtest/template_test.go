package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paysuite/payments/migrations"
)

// Several processes building the same template at once (simulated by
// goroutines that skip the in-process lock) must produce it exactly once.
func TestBuildTemplateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := adminPool(t)

	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	// A goose table of its own gives the set a template nobody else has.
	set := migrations.Set{Name: migrations.Platform.Name, Table: "goose_race_" + hex.EncodeToString(rnd[:])}
	name, err := templateName([]migrations.Set{set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		ident := pgx.Identifier{name}.Sanitize()
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE false"); err != nil {
			t.Errorf("unmark template: %v", err)
		}
		if _, err := admin.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop template: %v", err)
		}
	})

	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = buildTemplate(ctx, admin, name, []migrations.Set{set}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("builder %d: %v", i, err)
		}
	}

	var isTemplate, allowConn bool
	if err := admin.QueryRow(ctx, "SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1", name).
		Scan(&isTemplate, &allowConn); err != nil {
		t.Fatalf("look up template: %v", err)
	}
	if !isTemplate || allowConn {
		t.Errorf("template %s: datistemplate=%v datallowconn=%v, want true false", name, isTemplate, allowConn)
	}

	conn, err := pgx.Connect(ctx, NewDSN(t, set))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var applied, versions int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT version_id) FROM "+pgx.Identifier{set.Table}.Sanitize()+" WHERE version_id > 0").Scan(&applied, &versions); err != nil {
		t.Fatalf("read goose table: %v", err)
	}
	if applied == 0 || applied != versions {
		t.Errorf("goose recorded %d applications of %d migrations, want one each (applied more than once?)", applied, versions)
	}
}

func TestTemplateNameDependsOnSetsAndFiles(t *testing.T) {
	t.Parallel()
	a, err := templateName([]migrations.Set{migrations.Platform})
	if err != nil {
		t.Fatal(err)
	}
	b, err := templateName([]migrations.Set{migrations.Platform, {Name: "platform", Table: "other"}})
	if err != nil {
		t.Fatal(err)
	}
	none, err := templateName(nil)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == none || b == none {
		t.Errorf("template names collide: %s %s %s", a, b, none)
	}
	if again, _ := templateName([]migrations.Set{migrations.Platform}); again != a {
		t.Errorf("template name not stable: %s then %s", a, again)
	}
	if len(a) > 63 {
		t.Errorf("template name %q longer than PostgreSQL's 63 bytes", a)
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, prefix string }{
		{"TestX", "t_testx_"},
		{"TestX/sub-test #2", "t_testx_sub_test__2_"},
		{"TestAVeryLongNameThatGoesOnAndOnAndOnAndOnAndOnForeverAndEver/and/ever", "t_testaverylongnamethatgoesonandonandonand_"},
	} {
		got := databaseName(tc.in)
		if len(got) != len(tc.prefix)+12 || got[:len(tc.prefix)] != tc.prefix || len(got) > 63 {
			t.Errorf("databaseName(%q) = %q, want %q + 12 hex digits", tc.in, got, tc.prefix)
		}
	}
}
