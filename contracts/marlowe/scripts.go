package marlowe

import (
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// ScriptVersion is one registered pair of Marlowe validators: the semantics
// validator that locks contracts and the role-payout validator that locks
// payouts to role-token holders. All five are live on every network; only
// their reference-script UTxOs differ per network
// (marlowe-runtime Core/ScriptRegistry.hs).
type ScriptVersion struct {
	// Name is the version as users know it: "v1" (the audited scripts) to
	// "v5" (the current "Case as data" scripts).
	Name string
	// Registry is the name of the script set in the Marlowe Runtime's registry.
	Registry  string
	Semantics chain.Hash28
	Payout    chain.Hash28
}

func mustHash28(s string) chain.Hash28 {
	h, err := chain.ParseHash28(s)
	if err != nil {
		panic(err)
	}
	return h
}

// ScriptVersions lists every registered version, oldest first. The payout
// validator of a contract is the partner of its semantics validator here;
// it is never read from chain.
var ScriptVersions = []ScriptVersion{
	{"v1", "auditV1Scripts", mustHash28("6a9391d6aa51af28dd876ebb5565b69d1e83e5ac7861506bd29b56b0"), mustHash28("49076eab20243dc9462511fb98a9cfb719f86e9692288139b7c91df3")},
	{"v2", "postAuditV1Scripts", mustHash28("2ed2631dbb277c84334453c5c437b86325d371f0835a28b910a91a6e"), mustHash28("e165610232235bbbbeff5b998b233daae42979dec92a6722d9cda989")},
	{"v3", "node812V1Scripts", mustHash28("d85fa9bc2bdfd97d5ebdbc5e3fc66f7476213c40c21b73b41257f09d"), mustHash28("10ec7e02d25f5836b3e1098e0d4d8389e71d7a97a57aa737adc1d1fa")},
	{"v4", "plutus11500V1Scripts", mustHash28("6027a8010c555a4dd6b08882b899f4b3167c6e4524047132202dd984"), mustHash28("fdade3b86107bc715037b468574dd8d3f884a0da8c9956086b9a1a51")},
	{"v5", "caseAsDataV1Scripts", mustHash28("377325ad84a55ba0282d844dff2d5f0f18c33fd4a28a0a9d73c6f60d"), mustHash28("fcb8885eb5e4f9a5cfca3c75e8c7280e482af32dcdf2d13e47d05d27")},
}

// ScriptRole tells a semantics validator from a payout validator.
type ScriptRole uint8

// Script roles.
const (
	RoleSemantics ScriptRole = iota + 1
	RolePayout
)

// LookupScript finds the version and role of a script hash; ok is false for
// any hash that is not a Marlowe validator.
func LookupScript(h chain.Hash28) (v *ScriptVersion, role ScriptRole, ok bool) {
	for i := range ScriptVersions {
		switch h {
		case ScriptVersions[i].Semantics:
			return &ScriptVersions[i], RoleSemantics, true
		case ScriptVersions[i].Payout:
			return &ScriptVersions[i], RolePayout, true
		}
	}
	return nil, 0, false
}

// VersionByName returns the version called name ("v1".."v5").
func VersionByName(name string) (*ScriptVersion, bool) {
	for i := range ScriptVersions {
		if ScriptVersions[i].Name == name {
			return &ScriptVersions[i], true
		}
	}
	return nil, false
}
