// Package auth is who may use the streaming API: named bearer tokens with
// scopes, the principal a request authenticates as, and the owner check of
// durable streams. A durable stream belongs to the principal that created
// it (its token's name); starting, acknowledging, listing and deleting it
// take Principal.Owns. With no token configured the service is open: every
// request is the anonymous principal, which may do everything.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Scope is what a token allows.
type Scope string

// Scopes.
const (
	// ScopeSubscribe: ephemeral subscriptions on the WebSocket and /events.
	ScopeSubscribe Scope = "subscribe"
	// ScopeStreams: durable streams, the token's own (create, start, ack,
	// list, read, delete).
	ScopeStreams Scope = "streams"
	// ScopeAdmin: every durable stream, whoever owns it (list, read,
	// delete, start), for operators.
	ScopeAdmin Scope = "admin"
)

// DefaultScopes are a token's scopes when it names none.
var DefaultScopes = []Scope{ScopeSubscribe, ScopeStreams}

// AllScopes lists the scopes there are.
var AllScopes = []Scope{ScopeSubscribe, ScopeStreams, ScopeAdmin}

// LegacyName is the name of the token of the single-token setting
// (streaming.token).
const LegacyName = "default"

// Token is a named credential.
type Token struct {
	// Name identifies the token's principal: durable streams record it
	// as their owner. It is not secret.
	Name string
	// Secret is what clients present (Authorization: Bearer SECRET).
	Secret string
	// Scopes: DefaultScopes when empty.
	Scopes []Scope
}

// Principal is who a request authenticated as.
type Principal struct {
	// Name is the token's name; "" for the anonymous principal of an open
	// service.
	Name   string
	scopes []Scope
}

// Anonymous is the principal of every request to an open service (no
// tokens): it may do everything.
var Anonymous = Principal{scopes: AllScopes}

// Allows reports whether the principal has the scope (admin has all).
func (p Principal) Allows(s Scope) bool {
	return slices.Contains(p.scopes, s) || slices.Contains(p.scopes, ScopeAdmin)
}

// Owns reports whether the principal may use a durable stream whose owner
// is owner: its own, or any with the admin scope. This is the owner check
// of starting, acknowledging, listing, reading and deleting a stream.
func (p Principal) Owns(owner string) bool {
	return slices.Contains(p.scopes, ScopeAdmin) || (p.Allows(ScopeStreams) && p.Name == owner)
}

// Admin reports whether the principal sees every stream.
func (p Principal) Admin() bool { return slices.Contains(p.scopes, ScopeAdmin) }

// Authenticator checks the bearer tokens of requests.
type Authenticator struct {
	tokens []Token
	hashes [][sha256.Size]byte // of the secrets, compared in constant time
}

// New checks the tokens (names 1-64 of A-Z a-z 0-9 . _ -, unique; secrets
// not empty, without blanks, unique; known scopes) and returns
// their authenticator. No tokens: the service is open.
func New(tokens []Token) (*Authenticator, error) {
	a := &Authenticator{}
	names, secrets := map[string]bool{}, map[string]bool{}
	for _, t := range tokens {
		if !validName(t.Name) {
			return nil, fmt.Errorf("token name %q: 1 to 64 of the characters A-Z a-z 0-9 . _ -", t.Name)
		}
		if t.Name == "anonymous" {
			return nil, errors.New(`token name "anonymous" is reserved (the principal of an open server)`)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("token name %q is given twice", t.Name)
		}
		if t.Secret == "" || strings.ContainsAny(t.Secret, " \t\r\n") {
			return nil, fmt.Errorf("token %q: the secret must not be empty or contain blanks", t.Name)
		}
		if secrets[t.Secret] {
			return nil, fmt.Errorf("token %q: its secret is another token's", t.Name)
		}
		for _, s := range t.Scopes {
			if !slices.Contains(AllScopes, s) {
				return nil, fmt.Errorf("token %q: unknown scope %q (subscribe, streams, admin)", t.Name, s)
			}
		}
		names[t.Name], secrets[t.Secret] = true, true
		if len(t.Scopes) == 0 {
			t.Scopes = DefaultScopes
		}
		a.tokens = append(a.tokens, t)
		a.hashes = append(a.hashes, sha256.Sum256([]byte(t.Secret)))
	}
	return a, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Open reports whether no token is configured: every request is Anonymous.
func (a *Authenticator) Open() bool { return a == nil || len(a.tokens) == 0 }

// Names lists the tokens' names.
func (a *Authenticator) Names() []string {
	if a == nil {
		return nil
	}
	out := make([]string, len(a.tokens))
	for i, t := range a.tokens {
		out[i] = t.Name
	}
	return out
}

// Authenticate returns the principal of the request's bearer token (the
// Authorization header, or for browsers, which cannot set headers on
// WebSockets or EventSource, the access_token query parameter); false when
// tokens are configured and the request has none of them.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, bool) {
	if a.Open() {
		return Anonymous, true
	}
	tok := r.URL.Query().Get("access_token")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return Principal{}, false
		}
		tok = strings.TrimSpace(rest)
	}
	if tok == "" {
		return Principal{}, false
	}
	h := sha256.Sum256([]byte(tok))
	found := -1
	for i := range a.hashes { // every token compared: the time does not say which matched
		if subtle.ConstantTimeCompare(h[:], a.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	t := a.tokens[found]
	return Principal{Name: t.Name, scopes: t.Scopes}, true
}

// ErrBadTokens is wrapped by ParseTokens errors.
var ErrBadTokens = errors.New("bad token list")

// ParseTokens reads the text form of tokens, as the configuration gives
// them: entries NAME:SECRET or NAME:SECRET:SCOPE+SCOPE.
func ParseTokens(entries []string) ([]Token, error) {
	var out []Token
	for _, e := range entries {
		parts := strings.Split(strings.TrimSpace(e), ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("%w: %q is not NAME:SECRET or NAME:SECRET:SCOPE+SCOPE", ErrBadTokens, redact(e))
		}
		t := Token{Name: parts[0], Secret: parts[1]}
		if len(parts) == 3 {
			for s := range strings.SplitSeq(parts[2], "+") {
				t.Scopes = append(t.Scopes, Scope(strings.TrimSpace(s)))
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// redact keeps a token entry's name only, for messages.
func redact(e string) string {
	name, _, ok := strings.Cut(e, ":")
	if !ok {
		return "(a token without a name)"
	}
	return name + ":…"
}
