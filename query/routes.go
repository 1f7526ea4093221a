package query

import (
	"net/http"

	"github.com/marlowe-follower/follower/query/internal/api"
	"github.com/marlowe-follower/follower/query/runtime"
)

// RuntimePrefix is where the Marlowe Runtime view is mounted (package
// query/runtime); RuntimeVersion the Runtime version it answers as.
const (
	RuntimePrefix  = runtime.Prefix
	RuntimeVersion = runtime.Version
)

// RuntimeOpenAPI returns the view's OpenAPI document (/runtime/openapi.json).
func RuntimeOpenAPI() []byte { return runtime.OpenAPI() }

// routes is the route table of the port's APIs: the native API's, then,
// when the slot clock is known, the Runtime view's (it shows times).
func (s *Server) routes() ([]api.Route, error) {
	routes := []api.Route{
		{Pattern: "GET /contracts", Handler: s.contractList()},
		{Pattern: "GET /contracts/{contractId}", Handler: s.contractGet()},
		{Pattern: "GET /contracts/{contractId}/transactions", Handler: s.transactionList()},
		{Pattern: "GET /contracts/{contractId}/transactions/{txId}", Handler: s.transactionGet()},
		{Pattern: "GET /contracts/{contractId}/history", Handler: s.contractHistory()},
		{Pattern: "GET /contracts/{contractId}/next", Handler: s.contractNext()},
		{Pattern: "GET /payouts", Handler: s.payoutList()},
		{Pattern: "GET /payouts/{payoutId}", Handler: s.payoutGet()},
		{Pattern: "GET /withdrawals", Handler: s.withdrawalList()},
		{Pattern: "GET /withdrawals/{txId}", Handler: s.withdrawalGet()},
		{Pattern: "GET /transactions/{txId}", Handler: s.transactionOfTx()},
		{Pattern: "GET /sources/{sourceId}", Handler: s.sourceGet()},
		{Pattern: "GET /sources/{sourceId}/closure", Handler: s.sourceClosure()},
		{Pattern: "GET /stats", Handler: s.stats()},
		{Pattern: "GET /status", Handler: s.status},
		{Pattern: "GET /healthz", Handler: s.healthz},
		{Pattern: "GET /readyz", Handler: s.readyz},
		{Pattern: "GET /openapi.json", Handler: s.openAPI},
	}
	if s.cfg.Slots == nil {
		return routes, nil
	}
	view, err := runtime.New(runtime.Config{Env: s.env, Slots: *s.cfg.Slots, Logger: s.log.Named("runtime"),
		Status: func() runtime.Status {
			st := s.cfg.Status()
			return runtime.Status{NetworkMagic: st.NetworkMagic, Version: st.Version, NodeTip: st.NodeTip, Follower: st.Follower}
		},
		Route: func(r *http.Request) string {
			_, pattern := s.mux.Handler(r)
			return pattern
		}})
	if err != nil {
		return nil, err
	}
	return append(routes, view.Routes()...), nil
}
