package config

import (
	"fmt"
	"strings"
)

// Reference returns the configuration reference as Markdown: every setting
// with its YAML key, environment variable, flag, default and description.
// docs/configuration.md is this output (a test keeps it so).
func Reference() string {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from the configuration struct (`marlowe-follower config --reference`); do not edit by hand.\n\n")
	b.WriteString("Every setting can be given, highest precedence first, as a command-line flag, an environment\n")
	b.WriteString("variable, a key of the YAML file named by `--config`, or left to its default. `marlowe-follower config`\n")
	b.WriteString("prints the effective configuration (secrets redacted), `--sources` says where each value came from.\n")
	section := ""
	for _, s := range Settings() {
		if s.Section() != section {
			section = s.Section()
			fmt.Fprintf(&b, "\n## %s\n\n", section)
			b.WriteString("| YAML key | environment | flag | default | description |\n|---|---|---|---|---|\n")
		}
		def := s.Default
		if def == "" {
			def = "(empty)"
		}
		doc := s.Doc
		if s.Secret {
			doc += " (secret: redacted when shown)"
		}
		flag := "`--" + s.Flag + "`"
		if s.Type == "bool" {
			flag += ", `--" + NegatedFlag(s.Flag) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | `%s` | %s |\n", s.Path, s.Env, flag, def, strings.ReplaceAll(doc, "|", "\\|"))
	}
	b.WriteString("\nDurations are written like `500ms`, `10s` or `2m`.")
	for _, s := range Settings() {
		if s.Type == "bool" { // the first switch shows how all are written
			fmt.Fprintf(&b, " Switches are `true` or `false` (also yes/no, on/off, 1/0): `--%[1]s` alone is\n`--%[1]s=true`, `--%[2]s` is `--%[1]s=false`.", s.Flag, NegatedFlag(s.Flag))
			break
		}
	}
	b.WriteString(" Lists (")
	var lists []string
	for _, s := range Settings() {
		if s.Type == "list" {
			lists = append(lists, "`"+s.Path+"`")
		}
	}
	b.WriteString(strings.Join(lists, ", "))
	b.WriteString(") are comma separated in flags and\nthe environment, and a YAML list or a comma-separated string in the file. ")
	b.WriteString("A YAML file holds the sections above (role is a key of its own), for example:\n\n")
	b.WriteString("```yaml\nrole: writer\nnode:\n  socket: /ipc/node.socket\n  networkMagic: 1\nstore:\n  databaseURL: postgres://marlowe@db/marlowe\ncors:\n  origins:\n    - https://dapp.example\nlog:\n  level: info,chainsync=debug\n```\n")
	return b.String()
}
