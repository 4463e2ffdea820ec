package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// PreSigninCookieName carries the sign-in form's CSRF secret for a browser
// that is not signed in: the server keeps nothing for it. The value is
// signed (HMAC-SHA256 with a key of this process) and expires with
// loginTTL; the form's token must match it (a signed double-submit
// cookie).
const PreSigninCookieName = "console_signin"

// LoginCookieName carries a sign-in under way at the OpenID provider:
// its state, nonce and PKCE verifier, signed and short-lived, so that the
// server keeps nothing until the sign-in completes. The session cookie is
// SameSite=Strict, so the browser does not send it with the provider's
// redirect back to the console (a cross-site navigation); this one is
// SameSite=Lax (sent with top-level GET navigations only), HttpOnly, and
// scoped to the callback's path.
const LoginCookieName = "console_oidc"

// loginTTL bounds the time an operator may spend on the sign-in page and
// at the provider.
const loginTTL = 10 * time.Minute

// Kinds of signed cookie: a value of one kind never opens as another.
const (
	kindPreSignin = "presignin"
	kindLogin     = "login"
)

// pendingLogin is an OpenID Connect sign-in under way: what the callback
// must find again, from the login cookie.
type pendingLogin struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
}

// cookieSigner seals values into cookies and opens them again.
type cookieSigner struct{ key []byte }

// sealed is the signed content of a cookie.
type sealed struct {
	Kind    string          `json:"k"`
	Expires int64           `json:"e"`
	Data    json.RawMessage `json:"d"`
}

// seal returns base64url(JSON) "." base64url(HMAC) of v as kind, valid
// until expires.
func (c cookieSigner) seal(kind string, v any, expires time.Time) string {
	data, _ := json.Marshal(v) // the console's own structs
	payload, _ := json.Marshal(sealed{Kind: kind, Expires: expires.Unix(), Data: data})
	body := base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(c.mac(body))
}

// open checks raw's signature, kind and expiry at now, decodes it into v
// and returns its expiry; false for anything forged, altered, of another
// kind or expired.
func (c cookieSigner) open(kind, raw string, now time.Time, v any) (time.Time, bool) {
	body, sig, ok := strings.Cut(raw, ".")
	if !ok {
		return time.Time{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, c.mac(body)) {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return time.Time{}, false
	}
	var s sealed
	if json.Unmarshal(payload, &s) != nil || s.Kind != kind || now.Unix() >= s.Expires {
		return time.Time{}, false
	}
	return time.Unix(s.Expires, 0), json.Unmarshal(s.Data, v) == nil
}

func (c cookieSigner) mac(body string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// preSigninToken returns the CSRF token of the sign-in form for r's
// browser: the one its pre-sign-in cookie holds while that cookie has
// more than half its life left (so that two tabs share it), else a new
// one in a new cookie.
func (st *sessions) preSigninToken(w http.ResponseWriter, r *http.Request) string {
	now := st.now()
	if c, err := r.Cookie(PreSigninCookieName); err == nil {
		var tok string
		if exp, ok := st.signer.open(kindPreSignin, c.Value, now, &tok); ok && exp.Sub(now) > loginTTL/2 {
			return tok
		}
	}
	tok := randomToken()
	http.SetCookie(w, &http.Cookie{Name: PreSigninCookieName, Value: st.signer.seal(kindPreSignin, tok, now.Add(loginTTL)),
		Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode, MaxAge: int(loginTTL.Seconds())})
	return tok
}

// spendPreSignin reports whether token is the CSRF token of r's
// pre-sign-in cookie.
func (st *sessions) spendPreSignin(r *http.Request, token string) bool {
	c, err := r.Cookie(PreSigninCookieName)
	if err != nil || token == "" {
		return false
	}
	var tok string
	_, ok := st.signer.open(kindPreSignin, c.Value, st.now(), &tok)
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1
}

// clearPreSignin drops the pre-sign-in cookie (at sign-in).
func clearPreSignin(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: PreSigninCookieName, Value: "", Path: "/", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// startLogin puts l in the login cookie (replacing the cookie of a sign-in
// started before in the same browser, which then fails its callback).
func (st *sessions) startLogin(w http.ResponseWriter, l pendingLogin) {
	http.SetCookie(w, &http.Cookie{Name: LoginCookieName, Value: st.signer.seal(kindLogin, l, st.now().Add(loginTTL)),
		Path: "/oidc/callback", HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode, MaxAge: int(loginTTL.Seconds())})
}

// takeLogin returns the sign-in of r's login cookie and clears the
// cookie; nil when there is none, it is forged or expired, or its sign-in
// already completed (a callback signs in once).
func (st *sessions) takeLogin(w http.ResponseWriter, r *http.Request) *pendingLogin {
	c, err := r.Cookie(LoginCookieName)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: LoginCookieName, Value: "", Path: "/oidc/callback", HttpOnly: true, Secure: true,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
	var l pendingLogin
	if _, ok := st.signer.open(kindLogin, c.Value, st.now(), &l); !ok || st.spent(l.State) {
		return nil
	}
	return &l
}
