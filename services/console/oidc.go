package console

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/paysuite/payments/pkg/platform"
)

// OIDCConfig configures sign-in by OpenID Connect (authorization code
// flow with PKCE). The zero value, all unset, leaves only the pasted-token
// sign-in.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; discovery is read from
	// Issuer + /.well-known/openid-configuration.
	Issuer string
	// ClientID and ClientSecret are the console's client at the provider.
	ClientID     string
	ClientSecret string
	// RedirectURL is the console's callback as registered at the
	// provider: https://<console>/oidc/callback.
	RedirectURL string
	// Scopes are asked for at sign-in; openid is always among them.
	Scopes []string
	// Name is the provider's name on the sign-in page.
	Name string
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

// oidcFromEnv reads the CONSOLE_OIDC_* variables (see ConfigFromEnv).
// They are all or nothing: some set without the others is an error that
// names the missing ones.
func oidcFromEnv(env *platform.Env) OIDCConfig {
	c := OIDCConfig{
		Issuer:      env.String("CONSOLE_OIDC_ISSUER", ""),
		ClientID:    env.String("CONSOLE_OIDC_CLIENT_ID", ""),
		RedirectURL: env.String("CONSOLE_OIDC_REDIRECT_URL", ""),
		Name:        env.String("CONSOLE_OIDC_NAME", ""),
	}
	scopes := env.String("CONSOLE_OIDC_SCOPES", "")
	c.ClientSecret = readSecret(env, "CONSOLE_OIDC_CLIENT_SECRET")
	set := map[string]bool{
		"CONSOLE_OIDC_ISSUER":        c.Issuer != "",
		"CONSOLE_OIDC_CLIENT_ID":     c.ClientID != "",
		"CONSOLE_OIDC_CLIENT_SECRET": c.ClientSecret != "" || env.String("CONSOLE_OIDC_CLIENT_SECRET_FILE", "") != "",
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
		if scopes != "" || c.Name != "" {
			env.Check(errors.New("CONSOLE_OIDC_SCOPES or CONSOLE_OIDC_NAME is set but OpenID Connect is not configured: " +
				"set CONSOLE_OIDC_ISSUER, CONSOLE_OIDC_CLIENT_ID, CONSOLE_OIDC_CLIENT_SECRET (or _FILE) and CONSOLE_OIDC_REDIRECT_URL"))
		}
		return OIDCConfig{}
	}
	if len(missing) > 0 {
		env.Check(fmt.Errorf("OpenID Connect sign-in is partly configured: %s missing (set all of "+
			"CONSOLE_OIDC_ISSUER, CONSOLE_OIDC_CLIENT_ID, CONSOLE_OIDC_CLIENT_SECRET or _FILE, CONSOLE_OIDC_REDIRECT_URL, or none)",
			strings.Join(missing, ", ")))
	}
	if c.Issuer != "" {
		if u, err := url.Parse(c.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			env.Check(fmt.Errorf("CONSOLE_OIDC_ISSUER: %q is not an http(s) URL", c.Issuer))
		} else if c.Name == "" {
			c.Name = u.Hostname()
		}
	}
	if c.RedirectURL != "" {
		u, err := url.Parse(c.RedirectURL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			env.Check(fmt.Errorf("CONSOLE_OIDC_REDIRECT_URL: %q is not an http(s) URL", c.RedirectURL))
		case u.Path != CallbackPath || u.RawQuery != "" || u.Fragment != "":
			env.Check(fmt.Errorf("CONSOLE_OIDC_REDIRECT_URL: %q must end in the console's callback path %s, with no query", c.RedirectURL, CallbackPath))
		}
	}
	c.Scopes = []string{"openid"}
	for s := range strings.FieldsFuncSeq(scopes, func(r rune) bool { return r == ' ' || r == ',' }) {
		if !slices.Contains(c.Scopes, s) {
			c.Scopes = append(c.Scopes, s)
		}
	}
	return c
}

// readSecret reads variable name, or the file named by name_FILE (a
// secret mounted as a file). Errors name the variable, never a value.
func readSecret(env *platform.Env, name string) string {
	raw, file := env.String(name, ""), env.String(name+"_FILE", "")
	switch {
	case raw != "" && file != "":
		env.Check(fmt.Errorf("%s and %s_FILE are both set; set one", name, name))
		return ""
	case file != "":
		b, err := os.ReadFile(file) //nolint:gosec // the operator names the file
		if err != nil {
			env.Check(fmt.Errorf("%s_FILE: %w", name, err))
			return ""
		}
		raw = strings.TrimSpace(string(b))
		if raw == "" {
			env.Check(fmt.Errorf("%s_FILE: %s is empty", name, file))
		}
	}
	return raw
}
