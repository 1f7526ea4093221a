package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// GET .../contracts/{contractId}/next: the inputs that can be applied to a
// contract's current state in a validity interval, by the given parties
// (all when none), as the Marlowe Runtime computes them
// (Language.Marlowe.Core.V1.Next; marlowe.ComputeNext). Both APIs give the
// same answer; only the error bodies differ.

// NextRequest is a /next request's parameters.
type NextRequest struct {
	Start, End time.Time
	Parties    []marlowe.Party
}

// sdkPartyParam is the form the TypeScript SDK sends parties in (qs with
// indices): party[0][role_token]=NAME, party[1][address]=ADDR.
var sdkPartyParam = regexp.MustCompile(`^party\[(\d{1,3})\]\[(role_token|address)\]$`)

// AllowNext refuses names a /next request does not take (the native API's
// strictness): validityStart, validityEnd, party, the SDK's party[i][...]
// forms and minSeq.
func (q *Query) AllowNext() error {
	for name := range q.V {
		switch {
		case name == "validityStart", name == "validityEnd", name == "party", name == "minSeq", sdkPartyParam.MatchString(name):
		default:
			return Bad("unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes validityStart, validityEnd, party and minSeq", Clip(name)))
		}
	}
	return nil
}

// ParseNext reads validityStart and validityEnd (ISO 8601 times, required)
// and the parties: party=ROLE|ADDRESS (repeatable: a bech32 address is an
// address party, anything else a role name, as the Runtime reads them) or
// the SDK's party[i][role_token] and party[i][address].
func ParseNext(q *Query) (*NextRequest, error) {
	var nr NextRequest
	for _, name := range []string{"validityStart", "validityEnd"} {
		vs := q.V[name]
		if len(vs) != 1 {
			return nil, &BadRequest{Code: "bad_parameter", Param: name,
				Message: fmt.Sprintf("%s is required once (an ISO 8601 time such as 2024-01-31T12:00:00Z); given %d times", name, len(vs))}
		}
		t, err := time.Parse(time.RFC3339Nano, vs[0])
		if err != nil {
			return nil, &BadRequest{Code: "bad_parameter", Param: name,
				Message: fmt.Sprintf("%s %q: want an ISO 8601 time such as 2024-01-31T12:00:00Z", name, Clip(vs[0]))}
		}
		if name == "validityStart" {
			nr.Start = t
		} else {
			nr.End = t
		}
	}
	parties, err := q.List("party")
	if err != nil {
		return nil, err
	}
	for _, p := range parties {
		nr.Parties = append(nr.Parties, partyOfText(p))
	}
	sdk, err := sdkParties(q)
	if err != nil {
		return nil, err
	}
	if len(nr.Parties)+len(sdk) > MaxValues {
		return nil, &BadRequest{Code: "too_many_values", Param: "party",
			Message: fmt.Sprintf("%d parties; at most %d", len(nr.Parties)+len(sdk), MaxValues)}
	}
	nr.Parties = append(nr.Parties, sdk...)
	return &nr, nil
}

// sdkParties reads the SDK's indexed parties, in index order.
func sdkParties(q *Query) ([]marlowe.Party, error) {
	type indexed struct {
		i     int
		party marlowe.Party
	}
	var sdk []indexed
	for name, vs := range q.V {
		m := sdkPartyParam.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if len(vs) != 1 {
			return nil, &BadRequest{Code: "repeated_parameter", Param: name,
				Message: fmt.Sprintf("parameter %s is given %d times; it takes one value", Clip(name), len(vs))}
		}
		i, _ := strconv.Atoi(m[1])
		if m[2] == "address" {
			pa, err := marlowe.ParsePartyAddress(vs[0])
			if err != nil {
				return nil, &BadRequest{Code: "bad_address", Param: name,
					Message: fmt.Sprintf("%s %q: want a bech32 address", Clip(name), Clip(vs[0]))}
			}
			sdk = append(sdk, indexed{i, marlowe.Party{Address: pa}})
			continue
		}
		role, err := marlowe.NameFromText(vs[0])
		if err != nil {
			return nil, &BadRequest{Code: "bad_role", Param: name, Message: fmt.Sprintf("%s %q: %v", Clip(name), Clip(vs[0]), err)}
		}
		sdk = append(sdk, indexed{i, marlowe.Party{Role: role}})
	}
	sort.Slice(sdk, func(a, b int) bool { return sdk[a].i < sdk[b].i })
	out := make([]marlowe.Party, len(sdk))
	for i, p := range sdk {
		out[i] = p.party
	}
	return out, nil
}

// partyOfText reads a party as the Runtime does: an address when the text
// is a bech32 address, else a role name.
func partyOfText(s string) marlowe.Party {
	if pa, err := marlowe.ParsePartyAddress(s); err == nil {
		return marlowe.Party{Address: pa}
	}
	if role, err := marlowe.NameFromText(s); err == nil {
		return marlowe.Party{Role: role}
	}
	return marlowe.Party{Role: []byte(s)}
}

// ErrContractClosed: /next of a closed contract.
var ErrContractClosed = errors.New("contract closed")

// IntervalError is an interval the semantics refuse: the native 400
// bad_interval, the Runtime's 400 invalidInterval.
type IntervalError struct{ Err *marlowe.IntervalError }

func (e *IntervalError) Error() string { return e.Err.Error() }

// Next loads a contract and computes its next steps (the encoded answer).
func Next(ctx context.Context, contracts ContractReader, id chain.TxOutRef, nr *NextRequest) ([]byte, contractstore.Position, error) {
	c, at, err := contracts.ContractGet(ctx, id)
	if err != nil {
		return nil, at, err
	}
	if c.Status == contractstore.StatusClosed || c.Body == nil || len(c.Body.Contract) == 0 || string(c.Body.Contract) == "null" {
		return nil, at, ErrContractClosed
	}
	ct, err := marlowe.ParseContractJSON(c.Body.Contract)
	if err != nil {
		return nil, at, fmt.Errorf("contract %s: stored contract: %w", id, err)
	}
	st, err := marlowe.ParseStateJSON(c.Body.State)
	if err != nil {
		return nil, at, fmt.Errorf("contract %s: stored state: %w", id, err)
	}
	n, err := marlowe.ComputeNext(marlowe.EnvironmentFromTimes(nr.Start, nr.End), *st, ct)
	var ie *marlowe.IntervalError
	if errors.As(err, &ie) {
		return nil, at, &IntervalError{ie}
	}
	if err != nil {
		return nil, at, fmt.Errorf("contract %s: next: %w", id, err)
	}
	body, err := json.Marshal(n.FilterByParties(nr.Parties))
	return append(body, '\n'), at, err
}
