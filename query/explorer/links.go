package explorer

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// LinkKinds are what the pages link to a Cardano explorer for: a
// transaction, an address (bech32) and a minting policy (roles
// currencies, tokens).
var LinkKinds = []string{"tx", "address", "policy"}

// presets are the Cardano explorers known by name, per network: link
// templates with {id} where the transaction id, address or policy id goes.
var presets = map[string]map[string]map[string]string{
	"cardanoscan": {
		"mainnet": cardanoscan("https://cardanoscan.io"),
		"preprod": cardanoscan("https://preprod.cardanoscan.io"),
		"preview": cardanoscan("https://preview.cardanoscan.io"),
	},
	"cexplorer": {
		"mainnet": cexplorer("https://cexplorer.io"),
		"preprod": cexplorer("https://preprod.cexplorer.io"),
		"preview": cexplorer("https://preview.cexplorer.io"),
	},
}

// DefaultLinks is the explorer linked to when query.uiLinks is empty, on
// the networks it knows; other networks (the devnet) get no links.
const DefaultLinks = "cardanoscan"

func cardanoscan(base string) map[string]string {
	return map[string]string{"tx": base + "/transaction/{id}", "address": base + "/address/{id}", "policy": base + "/tokenPolicy/{id}"}
}

func cexplorer(base string) map[string]string {
	return map[string]string{"tx": base + "/tx/{id}", "address": base + "/address/{id}", "policy": base + "/policy/{id}"}
}

// ParseLinks resolves the query.uiLinks setting for a network (as /status
// names it: mainnet, preprod, preview, devnet, or a magic) into link
// templates by kind (LinkKinds); an empty map means no links. The setting
// is empty (the default explorer on mainnet, preprod and preview, none
// elsewhere), "none", the name of a known explorer (cardanoscan,
// cexplorer), or templates, KIND=URL comma separated, each URL http(s)
// with {id} where the identifier goes:
// tx=https://x.example/tx/{id},address=https://x.example/addr/{id}.
func ParseLinks(setting, network string) (map[string]string, error) {
	setting = strings.TrimSpace(setting)
	switch {
	case setting == "":
		return clone(presets[DefaultLinks][network]), nil
	case setting == "none":
		return map[string]string{}, nil
	case presets[setting] != nil:
		if network == "" { // (checking the setting alone)
			return map[string]string{}, nil
		}
		p := presets[setting][network]
		if p == nil {
			return nil, fmt.Errorf("%s has no explorer for network %s: give link templates (tx=URL,address=URL,policy=URL) or none", setting, network)
		}
		return clone(p), nil
	}
	out := map[string]string{}
	for _, part := range strings.Split(setting, ",") {
		kind, tmpl, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is neither none, a known explorer (%s) nor KIND=URL", part, strings.Join(presetNames(), ", "))
		}
		if !slices.Contains(LinkKinds, kind) {
			return nil, fmt.Errorf("link kind %q: not one of %s", kind, strings.Join(LinkKinds, ", "))
		}
		if _, dup := out[kind]; dup {
			return nil, fmt.Errorf("link kind %s given twice", kind)
		}
		u, err := url.Parse(strings.ReplaceAll(tmpl, "{id}", "ID"))
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("link %s=%s: not an http(s) URL", kind, tmpl)
		}
		if !strings.Contains(tmpl, "{id}") {
			return nil, fmt.Errorf("link %s=%s: no {id} where the identifier goes", kind, tmpl)
		}
		out[kind] = tmpl
	}
	return out, nil
}

func presetNames() []string {
	var names []string
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// clone copies a map; nil gives an empty one (no links).
func clone(m map[string]string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, m)
	return out
}
