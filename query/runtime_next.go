package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// GET /contracts/{contractId}/next: the inputs that can be applied to a
// contract's current state in a validity interval, by the given parties
// (all when none), as the Marlowe Runtime computes them
// (Language.Marlowe.Core.V1.Next; marlowe.ComputeNext). The view and the
// native API give the same answer; only the error bodies differ.

// nextRequest is a /next request's parameters.
type nextRequest struct {
	start, end time.Time
	parties    []marlowe.Party
}

// sdkPartyParam is the form the TypeScript SDK sends parties in (qs with
// indices): party[0][role_token]=NAME, party[1][address]=ADDR.
var sdkPartyParam = regexp.MustCompile(`^party\[(\d{1,3})\]\[(role_token|address)\]$`)

// parseNextRequest reads validityStart and validityEnd (ISO 8601 times,
// required) and the parties: party=ROLE|ADDRESS (repeatable: a bech32
// address is an address party, anything else a role name, as the Runtime
// reads them) or the SDK's party[i][role_token] and party[i][address].
func parseNextRequest(v map[string][]string) (*nextRequest, error) {
	var nr nextRequest
	for _, name := range []string{"validityStart", "validityEnd"} {
		vs := v[name]
		if len(vs) != 1 {
			return nil, bad("bad_parameter", fmt.Sprintf("%s is required once (an ISO 8601 time such as 2024-01-31T12:00:00Z); given %d times", name, len(vs)))
		}
		t, err := time.Parse(time.RFC3339Nano, vs[0])
		if err != nil {
			return nil, bad("bad_parameter", fmt.Sprintf("%s %q: want an ISO 8601 time such as 2024-01-31T12:00:00Z", name, clip(vs[0])))
		}
		if name == "validityStart" {
			nr.start = t
		} else {
			nr.end = t
		}
	}
	parties := v["party"]
	if len(parties) > maxValues {
		return nil, bad("too_many_values", fmt.Sprintf("parameter party is given %d times; at most %d", len(parties), maxValues))
	}
	for _, p := range parties {
		nr.parties = append(nr.parties, partyOfText(p))
	}
	// The SDK's indexed form, in index order.
	type indexed struct {
		i     int
		party marlowe.Party
	}
	var sdk []indexed
	for name, vs := range v {
		m := sdkPartyParam.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if len(vs) != 1 {
			return nil, bad("repeated_parameter", fmt.Sprintf("parameter %s is given %d times; it takes one value", clip(name), len(vs)))
		}
		i, _ := strconv.Atoi(m[1])
		if m[2] == "address" {
			pa, err := marlowe.ParsePartyAddress(vs[0])
			if err != nil {
				return nil, bad("bad_address", fmt.Sprintf("%s %q: want a bech32 address", clip(name), clip(vs[0])))
			}
			sdk = append(sdk, indexed{i, marlowe.Party{Address: pa}})
			continue
		}
		role, err := marlowe.NameFromText(vs[0])
		if err != nil {
			return nil, bad("bad_role", fmt.Sprintf("%s %q: %v", clip(name), clip(vs[0]), err))
		}
		sdk = append(sdk, indexed{i, marlowe.Party{Role: role}})
	}
	if len(nr.parties)+len(sdk) > maxValues {
		return nil, bad("too_many_values", fmt.Sprintf("%d parties; at most %d", len(nr.parties)+len(sdk), maxValues))
	}
	sort.Slice(sdk, func(a, b int) bool { return sdk[a].i < sdk[b].i })
	for _, p := range sdk {
		nr.parties = append(nr.parties, p.party)
	}
	return &nr, nil
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

// errContractClosed: /next of a closed contract.
var errContractClosed = errors.New("contract closed")

// nextError is an interval the semantics refuse: the Runtime's 400
// invalidInterval, its details the interval error.
type nextError struct{ ie *marlowe.IntervalError }

func (e *nextError) Error() string { return e.ie.Error() }

// computeNext loads a contract and computes its next steps.
func (s *Server) computeNext(ctx context.Context, id chain.TxOutRef, nr *nextRequest) ([]byte, contractstore.Position, error) {
	c, at, err := s.cfg.Contracts.ContractGet(ctx, id)
	if err != nil {
		return nil, at, err
	}
	if c.Status == contractstore.StatusClosed || c.Body == nil || len(c.Body.Contract) == 0 || string(c.Body.Contract) == "null" {
		return nil, at, errContractClosed
	}
	ct, err := marlowe.ParseContractJSON(c.Body.Contract)
	if err != nil {
		return nil, at, fmt.Errorf("contract %s: stored contract: %w", id, err)
	}
	st, err := marlowe.ParseStateJSON(c.Body.State)
	if err != nil {
		return nil, at, fmt.Errorf("contract %s: stored state: %w", id, err)
	}
	n, err := marlowe.ComputeNext(marlowe.EnvironmentFromTimes(nr.start, nr.end), *st, ct)
	var ie *marlowe.IntervalError
	if errors.As(err, &ie) {
		return nil, at, &nextError{ie}
	}
	if err != nil {
		return nil, at, fmt.Errorf("contract %s: next: %w", id, err)
	}
	body, err := json.Marshal(n.FilterByParties(nr.parties))
	return append(body, '\n'), at, err
}

// rtNext answers /next on the runtime view.
func (s *Server) rtNext(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("contractId") == "sources" {
		s.rtNotFound(w, r)
		return
	}
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	id, err := rtContractID(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	nr, err := parseNextRequest(q.v)
	if err != nil {
		s.rtError(w, r, asRuntimeBad(err, "Invalid parameters"))
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	body, at, err := s.computeNext(ctx, id, nr)
	s.rtPosition(w, at)
	var ne *nextError
	switch {
	case errors.Is(err, contractstore.ErrNotFound):
		rtWriteError(w, http.StatusNotFound, "contractNotFound", "Contract not found", nil)
	case errors.Is(err, errContractClosed):
		rtWriteError(w, http.StatusNotFound, "contractClosed", "Contract Closed", nil)
	case errors.As(err, &ne):
		details, _ := json.Marshal(ne.ie)
		rtWriteError(w, http.StatusBadRequest, "invalidInterval", "Invalid Interval", json.RawMessage(details))
	case err != nil:
		s.rtError(w, r, err)
	default:
		h := w.Header()
		h.Set("Content-Type", runtimeJSONContentType)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}
}

// contractNext answers /next on the native API.
func (s *Server) contractNext(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "validityStart", "validityEnd", "party")
	if err != nil {
		// The SDK's indexed party parameters are names parseQuery does not
		// know: accept them here as well.
		var rest map[string][]string
		if rest, err = nextParams(r); err == nil {
			q = &query{v: rest}
		}
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	id, err := parseContractID("contract_id", r.PathValue("contractId"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	nr, err := parseNextRequest(q.v)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	body, at, err := s.computeNext(ctx, id, nr)
	setPosition(w, at, s.cfg.Status().NodeTip)
	var ne *nextError
	switch {
	case errors.Is(err, errContractClosed):
		writeError(w, http.StatusNotFound, "contract_closed", "contract "+id.String()+" is closed: nothing can be applied")
	case errors.As(err, &ne):
		writeError(w, http.StatusBadRequest, "bad_interval", "the validity interval: "+ne.Error())
	case err != nil:
		s.fail(w, r, err, "contract "+id.String())
	default:
		writeBody(w, http.StatusOK, body)
	}
}

// nextParams reads a native /next query string: its names, minSeq, and the
// SDK's party[i][...] forms; any other name is refused.
func nextParams(r *http.Request) (map[string][]string, error) {
	q, err := parseRuntimeQuery(r)
	if err != nil {
		return nil, bad("bad_query", err.Error())
	}
	for name := range q.v {
		switch {
		case name == "validityStart", name == "validityEnd", name == "party", name == "minSeq", sdkPartyParam.MatchString(name):
		default:
			return nil, bad("unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes validityStart, validityEnd, party and minSeq", clip(name)))
		}
	}
	return q.v, nil
}

// reconstruct replays a step through the semantics, as the Runtime's
// reconstructedSemanticInput and reconstructedSemanticOutput show it: the
// transaction input (interval and inputs) and its output (warnings,
// payments, state, contract) or the transaction error.
func reconstruct(contractJSON, stateJSON json.RawMessage, sp *stepPayload) (json.RawMessage, json.RawMessage, error) {
	iv := sp.Interval
	in, err := json.Marshal(struct {
		Interval struct {
			From int64 `json:"from"`
			To   int64 `json:"to"`
		} `json:"tx_interval"`
		Inputs json.RawMessage `json:"tx_inputs"`
	}{Interval: struct {
		From int64 `json:"from"`
		To   int64 `json:"to"`
	}{*iv.FromMillis, *iv.ToMillis}, Inputs: rawOr(sp.Inputs, "[]")})
	if err != nil {
		return nil, nil, err
	}
	ct, err := marlowe.ParseContractJSON(contractJSON)
	if err != nil {
		return nil, nil, fmt.Errorf("input contract: %w", err)
	}
	st, err := marlowe.ParseStateJSON(stateJSON)
	if err != nil {
		return nil, nil, fmt.Errorf("input state: %w", err)
	}
	inputs, err := marlowe.ParseRedeemerJSON(rawOr(sp.Inputs, "[]"))
	if err != nil {
		return nil, nil, fmt.Errorf("inputs: %w", err)
	}
	tx := marlowe.TransactionInput{Interval: marlowe.TimeInterval{From: big.NewInt(*iv.FromMillis), To: big.NewInt(*iv.ToMillis)},
		Inputs: inputs}
	res, err := marlowe.ComputeTransaction(tx, *st, ct)
	out, err := marlowe.TransactionResultJSON(res, err)
	if err != nil {
		return nil, nil, fmt.Errorf("semantics: %w", err)
	}
	return in, out, nil
}

// roleText is a role's name as payouts store it (the Marlowe name escape).
func roleText(r record.RoleRef) string { return marlowe.NameText(r.Name) }

// payoutValidatorAddress is a role payout's output address: as recorded,
// or, for payouts stored before it was, the payout validator's address of
// the contract's script version without a stake credential.
func (s *Server) payoutValidatorAddress(ctx context.Context, po *contractstore.Payout) (string, error) {
	if po.ValidatorAddress != "" {
		return po.ValidatorAddress, nil
	}
	c, _, err := s.cfg.Contracts.ContractGet(ctx, po.ContractID)
	if err != nil {
		return "", err
	}
	v, ok := marlowe.VersionByName(c.Version)
	if !ok {
		return "", fmt.Errorf("payout %s: contract %s has the unknown script version %q", po.ID, po.ContractID, c.Version)
	}
	network := marlowe.Testnet
	if s.cfg.Status().NetworkMagic == mainnetMagic {
		network = marlowe.Mainnet
	}
	pa := marlowe.PartyAddress{Network: network, Address: marlowe.Address{Payment: marlowe.Credential{Kind: marlowe.ScriptCredential, Hash: v.Payout[:]}}}
	return pa.Bech32()
}
