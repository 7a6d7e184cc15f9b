package devissuer

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"

	"github.com/go-jose/go-jose/v4"
)

// keyring holds the signing key and every public key still published. It is
// safe for concurrent use: the token endpoint signs while tests rotate.
type keyring struct {
	mu        sync.RWMutex
	signer    jose.Signer
	priv      *rsa.PrivateKey
	kid       string
	published []jose.JSONWebKey // oldest first; the signing key is always here
}

// rotate makes a new RSA-2048 key the signing key and publishes it.
func (k *keyring) rotate() (string, error) {
	// Generated outside the lock: it takes tens of milliseconds, and signing
	// with the old key may go on meanwhile.
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("generate RSA key: %w", err)
	}
	pub := jose.JSONWebKey{Key: &priv.PublicKey, Algorithm: string(jose.RS256), Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("key thumbprint: %w", err)
	}
	// The RFC 7638 thumbprint is unique per key and needs no bookkeeping.
	kid := base64.RawURLEncoding.EncodeToString(thumb)
	pub.KeyID = kid
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		return "", fmt.Errorf("new signer: %w", err)
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	k.signer, k.priv, k.kid = signer, priv, kid
	k.published = append(k.published, pub)
	return kid, nil
}

// retire stops publishing the key. The signing key cannot be retired: tokens
// signed after that would verify nowhere.
func (k *keyring) retire(kid string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if kid == k.kid {
		return fmt.Errorf("key %q signs new tokens: rotate before retiring it", kid)
	}
	i := slices.IndexFunc(k.published, func(j jose.JSONWebKey) bool { return j.KeyID == kid })
	if i < 0 {
		return fmt.Errorf("key %q is not published", kid)
	}
	k.published = slices.Delete(k.published, i, i+1)
	return nil
}

// sign signs payload with the current key and returns the compact JWS.
func (k *keyring) sign(payload []byte) (string, error) {
	k.mu.RLock()
	signer := k.signer
	k.mu.RUnlock()
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return jws.CompactSerialize()
}

// signTyped is sign with typ as the header's typ instead of JWT.
func (k *keyring) signTyped(typ string, payload []byte) (string, error) {
	k.mu.RLock()
	priv, kid := k.priv, k.kid
	k.mu.RUnlock()
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)),
	)
	if err != nil {
		return "", fmt.Errorf("new signer: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return jws.CompactSerialize()
}

func (k *keyring) currentKID() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.kid
}

// jwks returns the published public keys.
func (k *keyring) jwks() jose.JSONWebKeySet {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return jose.JSONWebKeySet{Keys: slices.Clone(k.published)}
}

// verify checks that token is a compact JWS signed with RS256 by a key still
// published, and returns its payload.
func (k *keyring) verify(token string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%d signatures, want 1", len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.RLock()
	i := slices.IndexFunc(k.published, func(j jose.JSONWebKey) bool { return j.KeyID == kid })
	var pub jose.JSONWebKey
	if i >= 0 {
		pub = k.published[i]
	}
	k.mu.RUnlock()
	if i < 0 {
		return nil, fmt.Errorf("key %q is not published", kid)
	}
	payload, err := jws.Verify(pub.Key)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	return payload, nil
}
