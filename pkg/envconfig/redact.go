package envconfig

import (
	"net/url"
	"strings"
)

// RedactURL is an endpoint URL as logs and stored records may show it:
// scheme, host and path, without user info, query or fragment, where
// receivers put their tokens (secret:"endpoint"). A value that does not
// parse as a URL with a scheme and a host is hidden whole.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "***"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// RedactDSN is a database or broker URL as messages may show it: the
// password of its user info and the value of every query parameter whose
// name holds "password", "secret" or "token" (any case: password,
// sslpassword, auth_token) show as xxxxx; host, user, database and the
// other options stay, so that the message still says where it connected
// (secret:"url"). A value that does not parse as a URL with a scheme (a
// key=value DSN may hold a password) is hidden whole.
func RedactDSN(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "***"
	}
	if u.RawQuery != "" {
		q := u.Query()
		hidden := false
		for k := range q {
			if secretParam(k) {
				q[k] = []string{"xxxxx"}
				hidden = true
			}
		}
		if hidden {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted() // user:xxxxx@
}

// secretParam reports whether a URL query parameter named k carries a
// credential.
func secretParam(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token")
}
