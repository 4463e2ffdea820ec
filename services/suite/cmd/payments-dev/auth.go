package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/paysuite/payments/services/suite/internal/cli"

	"github.com/paysuite/payments/pkg/auth"
	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/services/suite"
)

// devAuth returns getenv with the suite's development keys configured when
// none are: the services of "payments-dev run" and "payments-dev demo"
// then trust the token key under .cache/auth, and the transfers service
// signs each transfer with the transfer authorization key there, which the
// ledger verifies; both are made on first use. A configured AUTH_JWKS_URL
// or AUTH_JWKS_FILE, and configured authorization key files, are left as
// they are.
func devAuth(getenv func(string) string, stdout io.Writer) (func(string) string, error) {
	getenv, err := devTransferKey(getenv, stdout)
	if err != nil {
		return nil, err
	}
	if getenv("AUTH_JWKS_URL") != "" || getenv("AUTH_JWKS_FILE") != "" {
		fmt.Fprintf(stdout, "Auth:       tokens of %s verified with %s\n", getenv("AUTH_ISSUER"), cli.FirstOf(getenv("AUTH_JWKS_URL"), getenv("AUTH_JWKS_FILE")))
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
	issuer := cli.FirstOf(getenv("AUTH_ISSUER"), auth.DevIssuer)
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

// devTransferKey returns getenv with the development transfer
// authorization key of .cache/auth (made when missing) given to the
// transfers service and its public JWKS to the ledger, unless either is
// configured.
func devTransferKey(getenv func(string) string, stdout io.Writer) (func(string) string, error) {
	const keyVar, jwksVar = "TRANSFERS_AUTHORIZATION_KEY_FILE", "LEDGER_AUTHORIZATION_JWKS_FILE"
	if getenv(keyVar) != "" || getenv(jwksVar) != "" {
		return getenv, nil
	}
	created, err := transfersig.EnsureKey(auth.DevDir, auth.DevDir)
	if err != nil {
		return nil, fmt.Errorf("development transfer authorization key: %w", err)
	}
	if created {
		fmt.Fprintf(stdout, "Transfers:  a new development transfer authorization key in %s\n", auth.DevDir)
	}
	return func(name string) string {
		switch name {
		case keyVar:
			return filepath.Join(auth.DevDir, transfersig.KeyFile)
		case jwksVar:
			return filepath.Join(auth.DevDir, transfersig.JWKSFile)
		}
		return getenv(name)
	}, nil
}

// demoTokens gives the demo the tokens of its three clients (two for the
// demo client: its main one and its refund one), signed with the
// key in keyFile for the configured (or development) issuer and audience.
func demoTokens(d *suite.Demo, keyFile string, getenv func(string) string) error {
	k, err := auth.ReadSigningKey(keyFile)
	if err != nil {
		return fmt.Errorf("demo tokens: %w", err)
	}
	sign := func(client string, scopes []string) (string, error) {
		return k.Sign(auth.Claims{
			Issuer:   cli.FirstOf(getenv("AUTH_ISSUER"), auth.DevIssuer),
			Audience: cli.FirstOf(getenv("AUTH_AUDIENCE"), auth.DefaultAudience),
			Subject:  client, Scopes: scopes, TTL: time.Hour,
		})
	}
	if d.Token, err = sign(suite.DemoClient, suite.DemoScopes); err != nil {
		return err
	}
	if d.RefundToken, err = sign(suite.DemoClient, suite.RefundScopes); err != nil {
		return err
	}
	if d.ReaderToken, err = sign(suite.ReaderClient, suite.ReaderScopes); err != nil {
		return err
	}
	d.MinterToken, err = sign(suite.MinterClient, suite.MinterScopes)
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
		Issuer:   cli.FirstOf(getenv("AUTH_ISSUER"), auth.DevIssuer),
		Audience: cli.FirstOf(getenv("AUTH_AUDIENCE"), auth.DefaultAudience),
		Subject:  suite.OperatorClient, Scopes: []string{auth.ScopeOperations}, TTL: 8 * time.Hour,
	})
}
