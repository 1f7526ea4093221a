package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// nextRequest is a /next request: the contract and the parameters.
type nextRequest struct {
	contract chain.TxOutRef
	next     *api.NextRequest
}

// next answers /next as the native API does (api.Next), with the
// Runtime's errors: contractNotFound, contractClosed, invalidInterval.
func (v *View) next() http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (nextRequest, error) {
		id, err := pathRef(r, "contractId", "contract id", "bad_contract_id")
		if err != nil {
			return nextRequest{}, err
		}
		nr, err := api.ParseNext(q)
		return nextRequest{id, nr}, err
	}, func(ctx context.Context, req nextRequest) (api.Answer, error) {
		body, at, err := api.Next(ctx, v.env.Contracts, req.contract, req.next)
		err = missing(err, &fail{status: http.StatusNotFound, code: "contractNotFound", message: "Contract not found", details: codeDetails("not_found")})
		return api.Answer{At: at, ContentType: jsonContentType, Body: body}, err
	})
}

// reconstruct replays a step through the semantics, as the Runtime's
// reconstructedSemanticInput and reconstructedSemanticOutput show it: the
// transaction input (interval and inputs) and its output (warnings,
// payments, state, contract) or the transaction error.
func reconstruct(contractJSON, stateJSON json.RawMessage, sp *stepPayload) (json.RawMessage, json.RawMessage, error) {
	iv := sp.Interval
	type interval struct {
		From int64 `json:"from"`
		To   int64 `json:"to"`
	}
	in, err := json.Marshal(struct {
		Interval interval        `json:"tx_interval"`
		Inputs   json.RawMessage `json:"tx_inputs"`
	}{Interval: interval{*iv.FromMillis, *iv.ToMillis}, Inputs: api.RawOr(sp.Inputs, "[]")})
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
	inputs, err := marlowe.ParseRedeemerJSON(api.RawOr(sp.Inputs, "[]"))
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
