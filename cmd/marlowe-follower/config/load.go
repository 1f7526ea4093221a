package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query/explorer"
	"github.com/marlowe-follower/follower/query/origin"
)

// Setting describes one configuration field.
type Setting struct {
	Path    string // dotted YAML path, e.g. "node.socket"
	Env     string
	Flag    string
	Default string
	Doc     string
	Secret  bool
	Type    string // string, uint32, int, uint64, bool, duration, list (of strings)
	index   []int
}

// Settings lists every setting in declaration order.
func Settings() []Setting {
	var out []Setting
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		sec := t.Field(i)
		if sec.Type.Kind() != reflect.Struct {
			// A setting outside a section (role): its YAML key is top-level.
			out = append(out, Setting{
				Path: sec.Tag.Get("yaml"), Env: sec.Tag.Get("env"), Flag: sec.Tag.Get("flag"),
				Default: sec.Tag.Get("default"), Doc: sec.Tag.Get("doc"), Secret: sec.Tag.Get("secret") == "true",
				Type: typeName(sec.Type), index: []int{i},
			})
			continue
		}
		for j := range sec.Type.NumField() {
			f := sec.Type.Field(j)
			out = append(out, Setting{
				Path:    sec.Tag.Get("yaml") + "." + f.Tag.Get("yaml"),
				Env:     f.Tag.Get("env"),
				Flag:    f.Tag.Get("flag"),
				Default: f.Tag.Get("default"),
				Doc:     f.Tag.Get("doc"),
				Secret:  f.Tag.Get("secret") == "true",
				Type:    typeName(f.Type),
				index:   []int{i, j},
			})
		}
	}
	return out
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "duration"
	}
	if t == reflect.TypeOf([]string(nil)) {
		return "list"
	}
	return t.Kind().String()
}

// Section returns the YAML section of a setting ("node" for "node.socket");
// a top-level setting (role) is a section of its own.
func (s Setting) Section() string {
	if i := strings.IndexByte(s.Path, '.'); i >= 0 {
		return s.Path[:i]
	}
	return s.Path
}

// key is the setting's key within its section ("socket" for
// "node.socket"), or "" for a top-level setting.
func (s Setting) key() string {
	if i := strings.IndexByte(s.Path, '.'); i >= 0 {
		return s.Path[i+1:]
	}
	return ""
}

// RegisterFlags adds the flags of the settings in the given sections, or
// of the settings named by their dotted path ("streaming.port"), to fs:
// all of them when none are given.
func RegisterFlags(fs *pflag.FlagSet, sections ...string) {
	for _, s := range Settings() {
		if len(sections) > 0 && !contains(sections, s.Section()) && !contains(sections, s.Path) {
			continue
		}
		usage := s.Doc
		if s.Env != "" {
			usage += " (" + s.Env + ")"
		}
		fs.Var(&settingValue{text: s.Default, typ: flagType(s.Type)}, s.Flag, usage)
		fs.Lookup(s.Flag).DefValue = s.Default
		if s.Type == "bool" {
			// --ui alone is --ui=true, and --no-ui is --ui=false.
			fs.Lookup(s.Flag).NoOptDefVal = "true"
			fs.Var(&settingValue{text: "false", typ: "bool"}, NegatedFlag(s.Flag), "the same as --"+s.Flag+"=false")
			fs.Lookup(NegatedFlag(s.Flag)).NoOptDefVal = "true"
		}
	}
}

// settingValue is a setting's flag: it keeps the text given (Load reads
// it as the setting's type, with the setting's messages) and tells --help
// the setting's type.
type settingValue struct {
	text string
	typ  string
}

func (v *settingValue) String() string     { return v.text }
func (v *settingValue) Set(s string) error { v.text = s; return nil }
func (v *settingValue) Type() string       { return v.typ }

// flagType is the type name --help shows for a setting type (pflag's
// names: a bool flag shows none).
func flagType(settingType string) string {
	switch settingType {
	case "duration", "bool":
		return settingType
	case "int", "int64", "int32":
		return "int"
	case "uint", "uint32", "uint64":
		return "uint"
	case "float64", "float32":
		return "float"
	case "list":
		return "strings"
	}
	return "string"
}

// NegatedFlag is the flag that turns a bool setting off: --no-ui for --ui.
func NegatedFlag(flag string) string { return "no-" + flag }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Source says where a setting's value came from.
type Source string

// Sources of values.
const (
	FromDefault Source = "default"
	FromFile    Source = "file"
	FromEnv     Source = "env"
	FromFlag    Source = "flag"
)

// Loaded is a configuration with where each setting came from.
type Loaded struct {
	Config  Config
	Sources map[string]Source // by setting path
}

// Load builds the configuration: defaults, then the YAML file (when path is
// not empty), then environment variables (looked up with env), then the
// flags of fs that were set on the command line.
func Load(fs *pflag.FlagSet, path string, env func(string) (string, bool)) (*Loaded, error) {
	l := &Loaded{Sources: map[string]Source{}}
	v := reflect.ValueOf(&l.Config).Elem()
	settings := Settings()
	for _, s := range settings {
		if err := set(v, s, s.Default); err != nil {
			return nil, fmt.Errorf("default of %s: %w", s.Path, err)
		}
		l.Sources[s.Path] = FromDefault
	}
	if path != "" {
		if err := l.loadFile(path, settings); err != nil {
			return nil, err
		}
	}
	if env == nil {
		env = os.LookupEnv
	}
	for _, s := range settings {
		if s.Env == "" {
			continue
		}
		if val, ok := env(s.Env); ok {
			if err := set(v, s, val); err != nil {
				return nil, fmt.Errorf("%s: %w", s.Env, err)
			}
			l.Sources[s.Path] = FromEnv
		}
	}
	if fs != nil {
		for _, s := range settings {
			if s.Type == "bool" {
				if err := l.negated(fs, v, s); err != nil {
					return nil, err
				}
			}
			f := fs.Lookup(s.Flag)
			if f == nil || !f.Changed {
				continue
			}
			if err := set(v, s, f.Value.String()); err != nil {
				return nil, fmt.Errorf("--%s: %w", s.Flag, err)
			}
			l.Sources[s.Path] = FromFlag
		}
	}
	if err := l.Config.Validate(); err != nil {
		return nil, err
	}
	return l, nil
}

// negated applies a bool setting's --no-NAME flag (given with --NAME too,
// both must agree).
func (l *Loaded) negated(fs *pflag.FlagSet, v reflect.Value, s Setting) error {
	neg := fs.Lookup(NegatedFlag(s.Flag))
	if neg == nil || !neg.Changed {
		return nil
	}
	off, err := parseBool(neg.Value.String())
	if err != nil {
		return fmt.Errorf("--%s: %w", neg.Name, err)
	}
	if f := fs.Lookup(s.Flag); f != nil && f.Changed {
		on, err := parseBool(f.Value.String())
		if err == nil && on == off {
			return fmt.Errorf("--%s and --%s contradict each other", s.Flag, neg.Name)
		}
	}
	if err := set(v, s, strconv.FormatBool(!off)); err != nil {
		return fmt.Errorf("--%s: %w", neg.Name, err)
	}
	l.Sources[s.Path] = FromFlag
	return nil
}

// parseBool reads true/false, yes/no, on/off, 1/0 (any case).
func parseBool(text string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "true", "yes", "on", "1", "t", "y":
		return true, nil
	case "false", "no", "off", "0", "f", "n":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", text)
}

// loadFile reads a YAML file whose keys must all be known settings.
func (l *Loaded) loadFile(path string, settings []Setting) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var doc map[string]yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	v := reflect.ValueOf(&l.Config).Elem()
	for section, secNode := range doc {
		keys := map[string]yaml.Node{}
		if top, ok := find(settings, section); ok && top.key() == "" {
			keys[""] = secNode // a top-level setting (role: writer)
		} else if err := secNode.Decode(&keys); err != nil {
			return fmt.Errorf("config file %s: %s must be a section of settings: %w", path, section, err)
		}
		for key, node := range keys {
			p := section
			if key != "" {
				p += "." + key
			}
			s, ok := find(settings, p)
			if !ok || (key != "" && s.key() == "") {
				return fmt.Errorf("config file %s: unknown setting %s", path, p)
			}
			text := node.Value
			switch {
			case node.Kind == yaml.SequenceNode && s.Type == "list":
				// A YAML list, or (below) a comma-separated string.
				items := make([]string, 0, len(node.Content))
				for _, item := range node.Content {
					if item.Kind != yaml.ScalarNode || strings.Contains(item.Value, ",") {
						return fmt.Errorf("config file %s: %s: each item of the list must be a single value", path, p)
					}
					items = append(items, item.Value)
				}
				text = strings.Join(items, ",")
			case node.Kind != yaml.ScalarNode:
				if s.Type == "list" {
					return fmt.Errorf("config file %s: %s must be a list or a comma-separated string", path, p)
				}
				return fmt.Errorf("config file %s: %s must be a single value", path, p)
			}
			if err := set(v, s, text); err != nil {
				return fmt.Errorf("config file %s: %s: %w", path, p, err)
			}
			l.Sources[p] = FromFile
		}
	}
	return nil
}

func find(settings []Setting, path string) (Setting, bool) {
	for _, s := range settings {
		if s.Path == path {
			return s, true
		}
	}
	return Setting{}, false
}

// set parses text into the setting's field.
func set(root reflect.Value, s Setting, text string) error {
	f := root.FieldByIndex(s.index)
	text = strings.TrimSpace(text)
	switch s.Type {
	case "string":
		f.SetString(text)
	case "duration":
		if text == "" {
			f.SetInt(0)
			return nil
		}
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 500ms, 10s, 2m)", text)
		}
		if d < 0 {
			return fmt.Errorf("%q must not be negative", text)
		}
		f.SetInt(int64(d))
	case "int":
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", text)
		}
		f.SetInt(n)
	case "list":
		var items []string
		for _, item := range strings.Split(text, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		f.Set(reflect.ValueOf(items))
	case "bool":
		b, err := parseBool(text)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case "uint32", "uint64":
		bits := 64
		if s.Type == "uint32" {
			bits = 32
		}
		n, err := strconv.ParseUint(text, 10, bits)
		if err != nil {
			return fmt.Errorf("%q is not a non-negative whole number below 2^%d", text, bits)
		}
		f.SetUint(n)
	default:
		return fmt.Errorf("unsupported setting type %s", s.Type)
	}
	return nil
}

// Validate checks the values and names the setting that is wrong.
func (c *Config) Validate() error {
	var errs []error
	switch c.Role {
	case RoleAll:
	case RoleWriter, RoleReader:
		if c.Store.DatabaseURL == "" {
			errs = append(errs, fmt.Errorf("role (MARLOWE_RT_ROLE) %s needs PostgreSQL: set store.databaseURL (MARLOWE_RT_DATABASE_URL); "+
				"the embedded SQLite store serves one process only (role all)", c.Role))
		}
	default:
		errs = append(errs, fmt.Errorf("role (MARLOWE_RT_ROLE): %q is not all, writer or reader", c.Role))
	}
	if c.Store.ReadDatabaseURL != "" && c.Role != RoleReader {
		errs = append(errs, fmt.Errorf("store.readDatabaseURL (MARLOWE_RT_READ_DATABASE_URL) is for role reader, not %s: "+
			"a writer reads and writes store.databaseURL", c.Role))
	}
	if c.Streaming.LeaseTTL <= 0 || c.Streaming.LeaseRetry <= 0 || c.Streaming.LeaseRetry >= c.Streaming.LeaseTTL {
		errs = append(errs, fmt.Errorf("streaming.leaseRetry (MARLOWE_RT_STREAMING_LEASE_RETRY, %s) and streaming.leaseTTL (MARLOWE_RT_STREAMING_LEASE_TTL, %s) must be positive, the retry shorter than the lease's life",
			c.Streaming.LeaseRetry, c.Streaming.LeaseTTL))
	}
	if _, err := explorer.ParseLinks(c.Query.UILinks, ""); err != nil {
		errs = append(errs, fmt.Errorf("query.uiLinks (MARLOWE_RT_QUERY_UI_LINKS): %w", err))
	}
	if c.Store.WriterLeaseTTL < storage.MinLeaseTTL {
		errs = append(errs, fmt.Errorf("store.writerLeaseTTL (MARLOWE_RT_WRITER_LEASE_TTL) is %s: want at least %s", c.Store.WriterLeaseTTL, storage.MinLeaseTTL))
	}
	port := func(name string, p int) {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s: port %d is outside 0..65535", name, p))
		}
	}
	port("query.port (MARLOWE_RT_QUERY_PORT)", c.Query.Port)
	port("streaming.port (MARLOWE_RT_STREAMING_PORT)", c.Streaming.Port)
	if c.Streaming.CatchUpCacheMB == 0 || c.Streaming.CatchUpCacheMB > 1<<30 {
		errs = append(errs, fmt.Errorf("streaming.catchUpCacheMB (MARLOWE_RT_STREAMING_CATCHUP_CACHE_MB) is %d: want 1 to 2^30 MiB", c.Streaming.CatchUpCacheMB))
	}
	if c.Streaming.CatchUpReads < 1 || c.Streaming.CatchUpReads > 1024 {
		errs = append(errs, fmt.Errorf("streaming.catchUpReads (MARLOWE_RT_STREAMING_CATCHUP_READS) is %d: want 1 to 1024", c.Streaming.CatchUpReads))
	}
	if c.Streaming.QueueBudgetMB == 0 || c.Streaming.QueueBudgetMB > 1<<30 {
		errs = append(errs, fmt.Errorf("streaming.queueBudgetMB (MARLOWE_RT_STREAMING_QUEUE_BUDGET_MB) is %d: want 1 to 2^30 MiB", c.Streaming.QueueBudgetMB))
	}
	if c.Query.Port != 0 && c.Query.Port == c.Streaming.Port && c.ListenHost(c.Query.Host) == c.ListenHost(c.Streaming.Host) {
		errs = append(errs, fmt.Errorf("query.port and streaming.port are both %d", c.Query.Port))
	}
	if c.Node.NetworkMagic == 0 {
		errs = append(errs, errors.New("node.networkMagic (MARLOWE_RT_NETWORK_MAGIC) must not be 0"))
	}
	if c.Node.MaxBackoff < c.Node.MinBackoff {
		errs = append(errs, fmt.Errorf("node.maxBackoff %s is below node.minBackoff %s", c.Node.MaxBackoff, c.Node.MinBackoff))
	}
	if c.Node.MinBackoff <= 0 {
		errs = append(errs, errors.New("node.minBackoff must be positive"))
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		errs = append(errs, fmt.Errorf("log.format (MARLOWE_RT_LOG_FORMAT): %q is neither json nor console", c.Log.Format))
	}
	if _, err := ParseLevels(c.Log.Level); err != nil {
		errs = append(errs, fmt.Errorf("log.level (MARLOWE_RT_LOG_LEVEL): %w", err))
	}
	switch c.Progress.Bar {
	case "auto", "always", "never":
	default:
		errs = append(errs, fmt.Errorf("progress.bar (MARLOWE_RT_PROGRESS_BAR): %q is not auto, always or never", c.Progress.Bar))
	}
	if _, err := origin.Parse(c.CORS.Origins); err != nil {
		errs = append(errs, fmt.Errorf("cors.origins (MARLOWE_RT_CORS_ORIGINS): %w", err))
	}
	if _, err := origin.Parse(c.Streaming.Origins); err != nil {
		errs = append(errs, fmt.Errorf("streaming.origins (MARLOWE_RT_STREAMING_ORIGINS): %w", err))
	}
	if _, err := c.streamingTokens(); err != nil {
		errs = append(errs, fmt.Errorf("streaming.tokens (MARLOWE_RT_STREAMING_TOKENS) and streaming.token: %w", err))
	}
	return errors.Join(errs...)
}

// DevnetOrigins is cors.origins under run --devnet when it is not set: a
// dApp served from any local port may use the APIs.
var DevnetOrigins = []string{origin.Any}

// ApplyDevnetDefaults sets in cfg (a copy of l.Config) the defaults run
// --devnet changes that do not depend on its temporary directory:
// cors.origins becomes DevnetOrigins unless it was set (a flag, the
// environment or the file; an explicit empty value keeps same-origin).
func (l *Loaded) ApplyDevnetDefaults(cfg *Config) {
	if l.Sources["cors.origins"] == FromDefault {
		cfg.CORS.Origins = append([]string(nil), DevnetOrigins...)
	}
}

// Redacted returns the configuration as YAML with secrets replaced.
func (l *Loaded) Redacted() ([]byte, error) {
	out := map[string]any{}
	v := reflect.ValueOf(l.Config)
	for _, s := range Settings() {
		f := v.FieldByIndex(s.index)
		var val any = f.Interface()
		if d, ok := val.(time.Duration); ok {
			val = d.String()
		}
		if s.Secret && !f.IsZero() && (f.Kind() != reflect.Slice || f.Len() > 0) {
			val = "<redacted>"
		}
		if s.key() == "" {
			out[s.Path] = val
			continue
		}
		sec, _ := out[s.Section()].(map[string]any)
		if sec == nil {
			sec = map[string]any{}
			out[s.Section()] = sec
		}
		sec[s.key()] = val
	}
	return yaml.Marshal(out)
}
