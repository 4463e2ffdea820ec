package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/services/suite"
)

// authCommand is "payments auth keygen|token": the suite's own token
// issuer (CONTRACTS.md section 8).
func authCommand(_ context.Context, sub string, args []string, getenv func(string) string, stdout io.Writer) error {
	switch sub {
	case "keygen":
		return authKeygen(args, stdout)
	case "token":
		return authToken(args, getenv, stdout)
	}
	return usageError{"auth: unknown subcommand " + sub}
}

func authKeygen(args []string, stdout io.Writer) error {
	fs := newFlags("auth keygen", "auth keygen --out DIR [--keep]", stdout)
	out := fs.String("out", "", "directory for "+auth.KeyFile+" (the private signing key, mode 0600) and "+auth.JWKSFile+" (the public JWKS the services trust)")
	keep := fs.Bool("keep", false, "when DIR already has a key, keep it and exit 0 (instead of refusing)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError{"auth keygen: --out DIR is required"}
	}
	if *keep {
		jwks, created, err := auth.EnsureKey(*out)
		if err != nil {
			return err
		}
		if !created {
			fmt.Fprintf(stdout, "%s already has a signing key; public JWKS %s\n", *out, jwks)
			return nil
		}
		fmt.Fprintf(stdout, "Ed25519 signing key written to %s; public JWKS %s\n", filepath.Join(*out, auth.KeyFile), jwks)
		return nil
	}
	kid, err := auth.GenerateKey(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Ed25519 signing key %s written to %s\npublic JWKS written to %s (AUTH_JWKS_FILE, or serve it as AUTH_JWKS_URL)\n",
		kid, filepath.Join(*out, auth.KeyFile), filepath.Join(*out, auth.JWKSFile))
	return nil
}

func authToken(args []string, getenv func(string) string, stdout io.Writer) error {
	fs := newFlags("auth token", "auth token --client NAME --scopes S1,S2 [--ttl 1h] [--key FILE] [--issuer ISS] [--audience AUD]", stdout)
	client := fs.String("client", "", "the client the token is for (its sub claim)")
	scopes := fs.String("scopes", "", "comma-separated scopes: "+strings.Join(allScopes, ", "))
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	key := fs.String("key", filepath.Join(auth.DevDir, auth.KeyFile), "the private signing key (payments auth keygen); the default is the development key of make run/demo")
	issuer := fs.String("issuer", "", "the iss claim (default $AUTH_ISSUER, then "+auth.DevIssuer+")")
	audience := fs.String("audience", "", "the aud claim (default $AUTH_AUDIENCE, then "+auth.DefaultAudience+")")
	if err := parse(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*client) == "" {
		return usageError{"auth token: --client NAME is required"}
	}
	if *ttl <= 0 || *ttl > 366*24*time.Hour {
		return usageError{"auth token: --ttl must be positive and at most a year"}
	}
	var list []string
	for s := range strings.SplitSeq(*scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return usageError{"auth token: --scopes is required (" + strings.Join(allScopes, ",") + ")"}
	}
	k, err := auth.ReadSigningKey(*key)
	if err != nil {
		return fmt.Errorf("%w (make run or make demo creates the development key; payments auth keygen makes one)", err)
	}
	tok, err := k.Sign(auth.Claims{
		Issuer:   firstOf(*issuer, getenv("AUTH_ISSUER"), auth.DevIssuer),
		Audience: firstOf(*audience, getenv("AUTH_AUDIENCE"), auth.DefaultAudience),
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

// allScopes are the scopes of CONTRACTS.md section 8.
var allScopes = []string{auth.ScopeTransfersCreate, auth.ScopeTransfersRead, auth.ScopeAccountsAdmin, auth.ScopeAccountsRead, auth.ScopeOperations}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// devAuth returns getenv with the suite's development key configured when
// no authentication is: the services of "payments run" and "payments
// demo" then trust the key under .cache/auth, made on first use. A
// configured AUTH_JWKS_URL or AUTH_JWKS_FILE is left as it is.
func devAuth(getenv func(string) string, stdout io.Writer) (func(string) string, error) {
	if getenv("AUTH_JWKS_URL") != "" || getenv("AUTH_JWKS_FILE") != "" {
		fmt.Fprintf(stdout, "Auth:       tokens of %s verified with %s\n", getenv("AUTH_ISSUER"), firstOf(getenv("AUTH_JWKS_URL"), getenv("AUTH_JWKS_FILE")))
		return getenv, nil
	}
	jwks, created, err := auth.EnsureKey(auth.DevDir)
	if err != nil {
		return nil, fmt.Errorf("development signing key: %w", err)
	}
	state := "the development signing key"
	if created {
		state = "a new development signing key"
	}
	fmt.Fprintf(stdout, "Auth:       %s in %s; a token: payments auth token --client NAME --scopes S1,S2\n", state, auth.DevDir)
	issuer := firstOf(getenv("AUTH_ISSUER"), auth.DevIssuer)
	return func(name string) string {
		switch name {
		case "AUTH_JWKS_FILE":
			return jwks
		case "AUTH_ISSUER":
			return issuer
		}
		return getenv(name)
	}, nil
}

// demoTokens gives the demo the tokens of its two clients, signed with the
// key in keyFile for the configured (or development) issuer and audience.
func demoTokens(d *suite.Demo, keyFile string, getenv func(string) string) error {
	k, err := auth.ReadSigningKey(keyFile)
	if err != nil {
		return fmt.Errorf("demo tokens: %w", err)
	}
	sign := func(client string, scopes []string) (string, error) {
		return k.Sign(auth.Claims{
			Issuer:   firstOf(getenv("AUTH_ISSUER"), auth.DevIssuer),
			Audience: firstOf(getenv("AUTH_AUDIENCE"), auth.DefaultAudience),
			Subject:  client, Scopes: scopes, TTL: time.Hour,
		})
	}
	if d.Token, err = sign(suite.DemoClient, suite.DemoScopes); err != nil {
		return err
	}
	d.ReaderToken, err = sign(suite.ReaderClient, suite.ReaderScopes)
	return err
}

// operatorToken signs the demo operator's console sign-in token (scope
// operacoes) with the key in keyFile.
func operatorToken(keyFile string, getenv func(string) string) (string, error) {
	k, err := auth.ReadSigningKey(keyFile)
	if err != nil {
		return "", fmt.Errorf("operator token: %w", err)
	}
	return k.Sign(auth.Claims{
		Issuer:   firstOf(getenv("AUTH_ISSUER"), auth.DevIssuer),
		Audience: firstOf(getenv("AUTH_AUDIENCE"), auth.DefaultAudience),
		Subject:  suite.OperatorClient, Scopes: []string{auth.ScopeOperations}, TTL: 8 * time.Hour,
	})
}

// secretValue reads a secret (a database URL) from file when given, else
// from the environment variable name: never from a flag, which any user
// of the machine sees in the process list.
func secretValue(file, name string, getenv func(string) string) (string, error) {
	if file == "" {
		return getenv(name), nil
	}
	b, err := os.ReadFile(file) //nolint:gosec // the operator names the file
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	return strings.TrimSpace(string(b)), nil
}
