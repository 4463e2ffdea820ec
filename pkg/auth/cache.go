package auth

import (
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/prometheus/client_golang/prometheus"
)

// tokenCache remembers the principals of tokens verified lately, so that a
// client sending the same token request after request costs one signature
// check, not one per request. It is keyed by the SHA-256 of the whole
// token (a token differing in any byte is another entry, and no token is
// kept in memory), bounded in entries (least recently used evicted), and
// holds only tokens that passed verification. Each entry carries the
// generation of the key set it was verified under and is used only while
// that generation is current; when the key set changes (a refresh that
// brings other keys, a rotation) the generation moves on and every entry
// is dropped. Time rules (exp, nbf, iat, lifetime) are checked again at
// each use by the caller.
type tokenCache struct {
	lru *lru.Cache[[sha256.Size]byte, cachedToken]

	cur atomic.Pointer[keyVersion] // the key set last seen and its generation
	mu  sync.Mutex                 // serialises generation changes

	hits, misses, flushes prometheus.Counter
	entries               prometheus.GaugeFunc
}

type cachedToken struct {
	p     Principal
	times tokenTimes
	gen   uint64
}

// keyVersion is a key set as fetched, the fingerprint of its keys and
// their generation: a refetch that brings the same keys keeps the
// generation.
type keyVersion struct {
	set jwk.Set
	fp  [sha256.Size]byte
	gen uint64
}

// newTokenCache returns a cache of size entries; nil when size is 0.
func newTokenCache(size int) *tokenCache {
	if size <= 0 {
		return nil
	}
	l, err := lru.New[[sha256.Size]byte, cachedToken](size)
	if err != nil { // only for a size below 1, excluded above
		return nil
	}
	c := &tokenCache{
		lru: l,
		hits: prometheus.NewCounter(prometheus.CounterOpts{Name: "auth_token_cache_hits_total",
			Help: "Bearer tokens answered from the verified-token cache (no signature check)."}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{Name: "auth_token_cache_misses_total",
			Help: "Bearer tokens not in the verified-token cache (or no longer valid there), verified in full."}),
		flushes: prometheus.NewCounter(prometheus.CounterOpts{Name: "auth_token_cache_flushes_total",
			Help: "Times the verified-token cache was dropped because the key set changed."}),
	}
	c.entries = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auth_token_cache_entries",
		Help: "Verified tokens in the cache."}, func() float64 { return float64(c.lru.Len()) })
	return c
}

// generation returns the generation of set, the key set in use now,
// dropping every entry when set holds other keys than the last one seen.
func (c *tokenCache) generation(set jwk.Set) uint64 {
	if v := c.cur.Load(); v != nil && v.set == set {
		return v.gen
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.cur.Load()
	if last != nil && last.set == set {
		return last.gen
	}
	next := &keyVersion{set: set, fp: fingerprint(set), gen: 1}
	if last != nil {
		next.gen = last.gen
		if next.fp != last.fp {
			next.gen++
			c.lru.Purge()
			c.flushes.Inc()
		}
	}
	c.cur.Store(next)
	return next.gen
}

// get returns the principal cached under key for generation gen when its
// times still pass valid; an entry of another generation, or one whose
// times fail, is removed and reported missing.
func (c *tokenCache) get(key [sha256.Size]byte, gen uint64, valid func(tokenTimes) bool) (Principal, bool) {
	e, ok := c.lru.Get(key)
	if ok && e.gen == gen && valid(e.times) {
		c.hits.Inc()
		return e.p, true
	}
	if ok {
		c.lru.Remove(key)
	}
	c.misses.Inc()
	return Principal{}, false
}

// peek is get without counting a miss (nothing is verified after it) and
// without removing a stale entry (the next get does).
func (c *tokenCache) peek(key [sha256.Size]byte, gen uint64, valid func(tokenTimes) bool) (Principal, bool) {
	e, ok := c.lru.Peek(key)
	if ok && e.gen == gen && valid(e.times) {
		c.hits.Inc()
		return e.p, true
	}
	return Principal{}, false
}

// add remembers p, verified under generation gen. Called only for a token
// that passed every check.
func (c *tokenCache) add(key [sha256.Size]byte, gen uint64, p Principal, times tokenTimes) {
	c.lru.Add(key, cachedToken{p: p, times: times, gen: gen})
}

// collectors are the cache's metrics.
func (c *tokenCache) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.hits, c.misses, c.flushes, c.entries}
}

// fingerprint identifies the keys of set: each key's id, algorithm and
// RFC 7638 thumbprint, in a stable order.
func fingerprint(set jwk.Set) [sha256.Size]byte {
	ids := make([]string, 0, set.Len())
	for i := range set.Len() {
		k, ok := set.Key(i)
		if !ok {
			continue
		}
		kid, _ := k.KeyID()
		alg, _ := k.Algorithm()
		id := kid + " " + k.KeyType().String()
		if alg != nil {
			id += " " + alg.String()
		}
		if tp, err := k.Thumbprint(crypto.SHA256); err == nil {
			id += " " + base64.RawURLEncoding.EncodeToString(tp)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return sha256.Sum256([]byte(strings.Join(ids, "\n")))
}

// Register registers the verifier's metrics in reg: the verified-token
// cache's hits, misses, flushes and entries (nothing when the cache is
// off).
func (v *Verifier) Register(reg prometheus.Registerer) error {
	if v.tokens == nil || reg == nil {
		return nil
	}
	for _, c := range v.tokens.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
