package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/paysuite/payments/services/suite/internal/cli"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/transfersig"
)

// authCommand is "payments auth keygen|token|transfer-keygen": the suite's
// own token issuer (CONTRACTS.md section 8), and the key that signs each
// transfer for the ledger (pkg/transfersig).
func authCommand(_ context.Context, sub string, args []string, getenv func(string) string, stdout io.Writer) error {
	switch sub {
	case "keygen":
		return authKeygen(args, stdout)
	case "transfer-keygen":
		return transferKeygen(args, stdout)
	case "token":
		return authToken(args, getenv, stdout)
	}
	return cli.UsageError{Msg: "auth: unknown subcommand " + sub}
}

func authKeygen(args []string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "auth keygen", "auth keygen --out DIR [--jwks-out DIR2] [--keep]", stdout)
	out := fs.String("out", "", "directory for "+auth.KeyFile+" (the private signing key, mode 0600) and "+auth.JWKSFile+" (the public JWKS the services trust)")
	jwksOut := fs.String("jwks-out", "", "also copy "+auth.JWKSFile+" into this directory (one the services may read, which the key is not in), on every run")
	keep := fs.Bool("keep", false, "when DIR already has a key, keep it and exit 0 (instead of refusing)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return cli.UsageError{Msg: "auth keygen: --out DIR is required"}
	}
	if *jwksOut != "" && filepath.Clean(*jwksOut) == filepath.Clean(*out) {
		return cli.UsageError{Msg: "auth keygen: --jwks-out must be another directory than --out"}
	}
	if *keep {
		jwks, created, err := auth.EnsureKey(*out)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(stdout, "Ed25519 signing key written to %s; public JWKS %s\n", filepath.Join(*out, auth.KeyFile), jwks)
		} else {
			fmt.Fprintf(stdout, "%s already has a signing key; public JWKS %s\n", *out, jwks)
		}
		return copyJWKS(jwks, *jwksOut, stdout)
	}
	kid, err := auth.GenerateKey(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Ed25519 signing key %s written to %s\npublic JWKS written to %s (AUTH_JWKS_FILE, or serve it as AUTH_JWKS_URL)\n",
		kid, filepath.Join(*out, auth.KeyFile), filepath.Join(*out, auth.JWKSFile))
	return copyJWKS(filepath.Join(*out, auth.JWKSFile), *jwksOut, stdout)
}

// copyJWKS copies the public JWKS at src into dir (nothing when dir is
// empty), through a temporary file renamed into place, so a reader never
// sees half a key set. docker-compose.yml gives the services that copy's
// volume and not the key's.
func copyJWKS(src, dir string, stdout io.Writer) error {
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(src) //nolint:gosec // the operator names the directory
	if err != nil {
		return fmt.Errorf("read public JWKS: %w", err)
	}
	// Only public keys leave the key's directory.
	set, err := jwk.Parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	for i := range set.Len() {
		k, _ := set.Key(i)
		if private, err := jwk.IsPrivateKey(k); err != nil || private {
			return fmt.Errorf("%s holds a private key (or one of an unknown type): not copied", src)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // a public key set's directory
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+auth.JWKSFile+".*")
	if err != nil {
		return fmt.Errorf("copy public JWKS: %w", err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename; removes a failed copy
	if _, err := tmp.Write(b); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the write error is the one to report
		return fmt.Errorf("copy public JWKS: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the chmod error is the one to report
		return fmt.Errorf("copy public JWKS: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("copy public JWKS: %w", err)
	}
	dst := filepath.Join(dir, auth.JWKSFile)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copy public JWKS: %w", err)
	}
	fmt.Fprintf(stdout, "public JWKS copied to %s\n", dst)
	return nil
}

func transferKeygen(args []string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "auth transfer-keygen", "auth transfer-keygen --out DIR [--public-out DIR] [--keep]", stdout)
	out := fs.String("out", "", "directory for "+transfersig.KeyFile+" (the private key, mode 0600: TRANSFERS_AUTHORIZATION_KEY_FILE, for the transfers service only)")
	pub := fs.String("public-out", "", "directory for "+transfersig.JWKSFile+" (the public JWKS: LEDGER_AUTHORIZATION_JWKS_FILE); default --out")
	keep := fs.Bool("keep", false, "when DIR already has a key, keep it and exit 0 (instead of refusing)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return cli.UsageError{Msg: "auth transfer-keygen: --out DIR is required"}
	}
	if *pub == "" {
		*pub = *out
	}
	keyPath, jwksPath := filepath.Join(*out, transfersig.KeyFile), filepath.Join(*pub, transfersig.JWKSFile)
	if *keep {
		created, err := transfersig.EnsureKey(*out, *pub)
		if err != nil {
			return err
		}
		if !created {
			fmt.Fprintf(stdout, "%s already has a transfer authorization key; public JWKS %s\n", *out, jwksPath)
			return nil
		}
		fmt.Fprintf(stdout, "Ed25519 transfer authorization key written to %s; public JWKS %s\n", keyPath, jwksPath)
		return nil
	}
	kid, err := transfersig.GenerateKey(*out, *pub)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Ed25519 transfer authorization key %s written to %s (TRANSFERS_AUTHORIZATION_KEY_FILE)\n"+
		"public JWKS written to %s (LEDGER_AUTHORIZATION_JWKS_FILE)\n", kid, keyPath, jwksPath)
	return nil
}

func authToken(args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cli.NewFlags("payments", "auth token", "auth token --client NAME --scopes S1,S2 [--ttl 1h] [--key FILE] [--issuer ISS] [--audience AUD]", stdout)
	client := fs.String("client", "", "the client the token is for (its sub claim)")
	scopes := fs.String("scopes", "", "comma-separated scopes: "+strings.Join(allScopes, ", "))
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token, at most $AUTH_MAX_TOKEN_LIFETIME (default "+auth.DefaultMaxTokenLifetime.String()+")")
	key := fs.String("key", filepath.Join(auth.DevDir, auth.KeyFile), "the private signing key (payments auth keygen); the default is the development key of make run/demo")
	issuer := fs.String("issuer", "", "the iss claim (default $AUTH_ISSUER, then "+auth.DevIssuer+")")
	audience := fs.String("audience", "", "the aud claim (default $AUTH_AUDIENCE, then "+auth.DefaultAudience+")")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*client) == "" {
		return cli.UsageError{Msg: "auth token: --client NAME is required"}
	}
	maxTTL, err := maxTokenLifetime(getenv)
	if err != nil {
		return err
	}
	if *ttl <= 0 {
		return cli.UsageError{Msg: "auth token: --ttl must be positive"}
	}
	if *ttl > maxTTL {
		return cli.UsageError{Msg: fmt.Sprintf("auth token: --ttl %v is over the longest token lifetime the services accept, %v "+
			"(AUTH_MAX_TOKEN_LIFETIME): they would refuse the token", *ttl, maxTTL)}
	}
	var list []string
	for s := range strings.SplitSeq(*scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return cli.UsageError{Msg: "auth token: --scopes is required (" + strings.Join(allScopes, ",") + ")"}
	}
	k, err := auth.ReadSigningKey(*key)
	if err != nil {
		return fmt.Errorf("%w (make run or make demo creates the development key; payments auth keygen makes one)", err)
	}
	tok, err := k.Sign(auth.Claims{
		Issuer:   cli.FirstOf(*issuer, getenv("AUTH_ISSUER"), auth.DevIssuer),
		Audience: cli.FirstOf(*audience, getenv("AUTH_AUDIENCE"), auth.DefaultAudience),
		Subject:  strings.TrimSpace(*client),
		Scopes:   list,
		TTL:      *ttl,
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

// maxTokenLifetime is AUTH_MAX_TOKEN_LIFETIME, the longest lifetime the
// services accept, or its default.
func maxTokenLifetime(getenv func(string) string) (time.Duration, error) {
	v := strings.TrimSpace(getenv("AUTH_MAX_TOKEN_LIFETIME"))
	if v == "" {
		return auth.DefaultMaxTokenLifetime, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("AUTH_MAX_TOKEN_LIFETIME: %q is not a positive duration", v)
	}
	if d == 0 {
		return auth.DefaultMaxTokenLifetime, nil
	}
	return d, nil
}

// allScopes are the scopes of CONTRACTS.md section 8 (and section 10's
// transferencias:estornar).
var allScopes = []string{auth.ScopeTransfersCreate, auth.ScopeTransfersRead, auth.ScopeTransfersRefund, auth.ScopeAccountsAdmin,
	auth.ScopeAccountsDeposit, auth.ScopeAccountsRead, auth.ScopeOperations}
