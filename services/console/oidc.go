package console

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
)

// OIDCConfig configures sign-in by OpenID Connect (authorization code
// flow with PKCE). The zero value, all unset, leaves only the pasted-token
// sign-in.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; discovery is read from
	// Issuer + /.well-known/openid-configuration.
	Issuer string `env:"CONSOLE_OIDC_ISSUER" help:"the provider's issuer URL (discovery); OpenID Connect sign-in needs it, the client id, the secret and the redirect URL, or none of them"`
	// ClientID and ClientSecret are the console's client at the provider.
	ClientID         string `env:"CONSOLE_OIDC_CLIENT_ID" help:"the console's client id at the provider"`
	ClientSecret     string `env:"CONSOLE_OIDC_CLIENT_SECRET" secret:"true" help:"its secret (never logged); prefer CONSOLE_OIDC_CLIENT_SECRET_FILE"`
	ClientSecretFile string `env:"CONSOLE_OIDC_CLIENT_SECRET_FILE" help:"a file holding the secret instead (a mounted secret)"`
	// RedirectURL is the console's callback as registered at the
	// provider: https://<console>/oidc/callback.
	RedirectURL string `env:"CONSOLE_OIDC_REDIRECT_URL" help:"https://<console>/oidc/callback, as registered at the provider"`
	// ScopeList is CONSOLE_OIDC_SCOPES as given; Scopes is what is asked
	// for at sign-in: openid, then ScopeList's, space or comma separated.
	ScopeList string `env:"CONSOLE_OIDC_SCOPES" help:"scopes asked for besides openid (space or comma separated)"`
	Scopes    []string
	// Name is the provider's name on the sign-in page.
	Name string `env:"CONSOLE_OIDC_NAME" help:"the provider's name on the sign-in page (default: the issuer's host)"`
}

// Enabled reports whether OpenID Connect sign-in is configured.
func (c OIDCConfig) Enabled() bool { return c.Issuer != "" }

// String keeps the client secret out of any printed configuration.
func (c OIDCConfig) String() string {
	return fmt.Sprintf("{Issuer:%s ClientID:%s ClientSecret:[REDACTED] RedirectURL:%s Scopes:%v Name:%s}",
		c.Issuer, c.ClientID, c.RedirectURL, c.Scopes, c.Name)
}

// CallbackPath is the path of the console's OpenID Connect callback: the
// path of CONSOLE_OIDC_REDIRECT_URL.
const CallbackPath = "/oidc/callback"

// complete checks the OpenID Connect settings (all four of issuer, client
// id, secret and redirect URL, or none), reads the secret's file and
// derives Scopes and Name. It returns every problem found.
func (c *OIDCConfig) complete() []error {
	var errs []error
	secret, err := readSecret("CONSOLE_OIDC_CLIENT_SECRET", c.ClientSecret, c.ClientSecretFile)
	if err != nil {
		errs = append(errs, err)
	}
	c.ClientSecret = secret
	set := map[string]bool{
		"CONSOLE_OIDC_ISSUER":        c.Issuer != "",
		"CONSOLE_OIDC_CLIENT_ID":     c.ClientID != "",
		"CONSOLE_OIDC_CLIENT_SECRET": c.ClientSecret != "" || c.ClientSecretFile != "",
		"CONSOLE_OIDC_REDIRECT_URL":  c.RedirectURL != "",
	}
	var missing []string
	for name, ok := range set {
		if !ok {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) == len(set) {
		if c.ScopeList != "" || c.Name != "" {
			errs = append(errs, errors.New("CONSOLE_OIDC_SCOPES or CONSOLE_OIDC_NAME is set but OpenID Connect is not configured: "+
				"set CONSOLE_OIDC_ISSUER, CONSOLE_OIDC_CLIENT_ID, CONSOLE_OIDC_CLIENT_SECRET (or _FILE) and CONSOLE_OIDC_REDIRECT_URL"))
		}
		*c = OIDCConfig{}
		return errs
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("OpenID Connect sign-in is partly configured: %s missing (set all of "+
			"CONSOLE_OIDC_ISSUER, CONSOLE_OIDC_CLIENT_ID, CONSOLE_OIDC_CLIENT_SECRET or _FILE, CONSOLE_OIDC_REDIRECT_URL, or none)",
			strings.Join(missing, ", ")))
	}
	if c.Issuer != "" {
		if u, err := url.Parse(c.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("CONSOLE_OIDC_ISSUER: %q is not an http(s) URL", c.Issuer))
		} else if c.Name == "" {
			c.Name = u.Hostname()
		}
	}
	if c.RedirectURL != "" {
		u, err := url.Parse(c.RedirectURL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			errs = append(errs, fmt.Errorf("CONSOLE_OIDC_REDIRECT_URL: %q is not an http(s) URL", c.RedirectURL))
		case u.Path != CallbackPath || u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("CONSOLE_OIDC_REDIRECT_URL: %q must end in the console's callback path %s, with no query", c.RedirectURL, CallbackPath))
		}
	}
	c.Scopes = []string{"openid"}
	for s := range strings.FieldsFuncSeq(c.ScopeList, func(r rune) bool { return r == ' ' || r == ',' }) {
		if !slices.Contains(c.Scopes, s) {
			c.Scopes = append(c.Scopes, s)
		}
	}
	return errs
}

// readSecret returns the secret of variable name: its value raw, or the
// content of file (name_FILE, a secret mounted as a file). Errors name the
// variable, never a value.
func readSecret(name, raw, file string) (string, error) {
	switch {
	case raw != "" && file != "":
		return "", fmt.Errorf("%s and %s_FILE are both set; set one", name, name)
	case file != "":
		b, err := os.ReadFile(file) //nolint:gosec // the operator names the file
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		raw = strings.TrimSpace(string(b))
		if raw == "" {
			return "", fmt.Errorf("%s_FILE: %s is empty", name, file)
		}
	}
	return raw, nil
}
