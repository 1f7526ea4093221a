// Package querytest is what the load tools of the query API share: the
// query package's load benchmark and the benchmark suite's query section
// (cmd/marlowe-bench) run their clients (Load) and ask for contracts
// (FetchCount) through it.
package querytest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// contractKey is how each contract of a list answer begins.
var contractKey = []byte(`{"contractId":`)

// FetchCount asks for u and counts the contracts in the answer, reading the
// whole body: one for a lookup (isList false), the contracts of the page
// for a list. A load tool counts them so, without decoding, to leave the
// CPU to the server.
func FetchCount(ctx context.Context, client *http.Client, u string, isList bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return 0, fmt.Errorf("GET %s: %d", u, res.StatusCode)
	}
	if !isList {
		_, err := io.Copy(io.Discard, res.Body)
		return 1, err
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	return bytes.Count(body, contractKey), nil
}
