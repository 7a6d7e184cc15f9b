package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Errors of the key set. errKeyNotKnownYet is the only one that may change
// for the same token: the key may be published by the next fetch.
var (
	errBadSignature   = errors.New("signature does not verify with the issuer's key")
	errUnknownKey     = errors.New("token signed with a key the issuer does not publish")
	errKeyNotKnownYet = errors.New("token signed with a key not seen yet; the issuer's keys were fetched too recently to fetch them again")
	errKeysFetch      = errors.New("fetching the issuer's signing keys")
)

// maxJWKSBytes bounds the JWKS document read from the issuer.
const maxJWKSBytes = 1 << 20

// retryFailedFetchEvery bounds how often a failed key fetch is retried.
const retryFailedFetchEvery = 2 * time.Second

// keySet is the issuer's JWKS, cached. It replaces go-oidc's RemoteKeySet,
// which fetches the keys again for every token whose signature does not
// verify: there, each forged token costs the identity provider a request.
// Here a token whose key id is known is judged by that key alone, and an
// unknown key id makes the set fetch the keys again at most once per
// refetchEvery, whoever asks; a token that still names an unknown key is
// refused meanwhile. The first fetch does not count: a key rotated just
// after it is fetched at once.
type keySet struct {
	url          string
	client       *http.Client
	timeout      time.Duration
	refetchEvery time.Duration
	algs         []jose.SignatureAlgorithm
	now          func() time.Time

	keys    atomic.Pointer[[]jose.JSONWebKey] // nil until the first fetch succeeds
	fetches atomic.Uint64

	mu          sync.Mutex // serializes fetches, guards the fields below
	gen         uint64     // incremented by every successful fetch
	lastRefetch time.Time  // last fetch made for an unknown key id (not the first fetch)
	lastFail    time.Time  // last attempt that failed
}

// verifySignature parses the compact JWS raw, once, and verifies its
// signature with the issuer's key it names; it returns the payload and the
// JOSE header's typ, if any.
func (k *keySet) verifySignature(ctx context.Context, raw string) (payload []byte, headerType string, err error) {
	jws, err := jose.ParseSignedCompact(raw, k.algs)
	if err != nil {
		return nil, "", fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, "", errors.New("token must carry exactly one signature")
	}
	headerType, _ = jws.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string)
	kid := jws.Signatures[0].Header.KeyID
	for {
		k.mu.Lock()
		gen := k.gen
		k.mu.Unlock()
		if keys := k.keys.Load(); keys != nil {
			payload, found, err := verifyWith(jws, *keys, kid)
			if found {
				return payload, headerType, err
			}
		}
		// The key is not known: fetch the set again, unless another call did
		// meanwhile (then look again) or the last fetch is too recent.
		fetched, err := k.refetch(ctx, gen)
		if errors.Is(err, errKeyNotKnownYet) && kid == "" {
			// No key id to wait for: none of the current keys verifies it.
			return nil, "", errBadSignature
		}
		if err != nil {
			return nil, "", err
		}
		if !fetched {
			continue
		}
		keys := k.keys.Load()
		payload, found, err := verifyWith(jws, *keys, kid)
		if !found {
			return nil, "", errUnknownKey
		}
		return payload, headerType, err
	}
}

// verifyWith verifies jws with the key named kid, or with every key when kid
// is empty. found reports whether any key was tried (kid empty: whether one
// verified, since a key without id may be new).
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, found bool, err error) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		p, err := jws.Verify(&keys[i])
		if err == nil {
			return p, true, nil
		}
		if kid != "" {
			return nil, true, errBadSignature
		}
	}
	return nil, false, nil
}

// refetch fetches the key set when no other call has since generation gen
// and the last fetch is old enough. fetched false with a nil error means
// another call fetched: look at the keys again.
func (k *keySet) refetch(ctx context.Context, gen uint64) (fetched bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != gen {
		return false, nil
	}
	now := k.now()
	if !k.lastFail.IsZero() && now.Sub(k.lastFail) < retryFailedFetchEvery {
		return false, fmt.Errorf("%w: last attempt failed %v ago", errKeysFetch, now.Sub(k.lastFail).Round(time.Millisecond))
	}
	refetch := k.keys.Load() != nil
	if refetch && !k.lastRefetch.IsZero() && now.Sub(k.lastRefetch) < k.refetchEvery {
		return false, errKeyNotKnownYet
	}
	if refetch {
		// Counted from the attempt, so that a failing issuer is not asked
		// more often either.
		k.lastRefetch = now
	}
	// The fetch serves every caller waiting here, not only this one: it
	// runs to its own deadline whatever becomes of ctx.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
	defer cancel()
	keys, err := k.fetch(fctx)
	k.fetches.Add(1)
	if err != nil {
		k.lastFail = k.now()
		return false, fmt.Errorf("%w: %w", errKeysFetch, err)
	}
	k.lastFail = time.Time{}
	k.keys.Store(&keys)
	k.gen++
	return true, nil
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", k.url, res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("GET %s: key set larger than %d bytes", k.url, maxJWKSBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	keys := set.Keys[:0]
	for _, key := range set.Keys {
		// Only public signature keys: a symmetric key in a JWKS would let
		// anyone who reads the JWKS sign tokens.
		if key.IsPublic() && key.Valid() && (key.Use == "" || key.Use == "sig") {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// Fetches returns how many times the key set was fetched, successfully or not.
func (k *keySet) Fetches() uint64 { return k.fetches.Load() }

// ready reports whether the keys have been fetched, fetching them if they
// have not (to the fetch's own deadline, as for a token).
func (k *keySet) ready(ctx context.Context) error {
	for k.keys.Load() == nil {
		k.mu.Lock()
		gen := k.gen
		k.mu.Unlock()
		if k.keys.Load() != nil {
			return nil
		}
		if _, err := k.refetch(ctx, gen); err != nil {
			return err
		}
	}
	return nil
}
