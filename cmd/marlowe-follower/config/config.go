// Package config is marlowe-follower's configuration: one struct whose field
// tags say where each setting comes from. Settings are layered, highest
// first: command-line flags, environment variables (MARLOWE_RT_*), a YAML
// file, then the defaults below. Validation names the setting that is wrong.
package config

import (
	"time"

	"github.com/marlowe-follower/follower/streaming/auth"
)

// Defaults.
const (
	DefaultNetworkMagic   = 764824073 // mainnet
	DefaultQueryPort      = 3780
	DefaultStreamingPort  = 3781
	DefaultDataDir        = "./marlowe-follower-data"
	DefaultLogLevel       = "info"
	DefaultLogFormat      = "json"
	DefaultStart          = "origin"
	DefaultMinBackoff     = 200 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultProgressPeriod = 10 * time.Second
	DefaultReadyDistance  = 10
	// DefaultReadyProjectionLag is query.readyProjectionLag's default.
	DefaultReadyProjectionLag = 100
	DefaultShutdownGrace      = 15 * time.Second
	DefaultRole               = RoleAll
)

// Roles of a process (the role setting).
const (
	// RoleAll is one process doing everything: it follows the node, writes
	// the history, the projection and the durable streams, and serves.
	RoleAll = "all"
	// RoleWriter follows the node and writes, on PostgreSQL only, holding
	// the writer lease: a second writer waits as a hot standby.
	RoleWriter = "writer"
	// RoleReader serves from the shared PostgreSQL database only.
	RoleReader = "reader"
)

// Config is every setting of marlowe-follower. Each field's tags give its
// YAML key (yaml), environment variable (env), flag (flag), default
// (default) and description (doc); secret fields are redacted when shown.
type Config struct {
	// Role is the one setting outside a section (YAML key role).
	Role      string    `yaml:"role" env:"MARLOWE_RT_ROLE" flag:"role" default:"all" doc:"what this process does: all (follow the node, write and serve: one process), writer (follow and write, and serve unless the ports are 0; PostgreSQL only: one writer holds the writer lease, another waits as a hot standby and takes over when it expires or is let go) or reader (serve the query and streaming APIs from the shared PostgreSQL database, no node connection)"`
	Node      Node      `yaml:"node"`
	Store     Store     `yaml:"store"`
	Query     Query     `yaml:"query"`
	Streaming Streaming `yaml:"streaming"`
	CORS      CORS      `yaml:"cors"`
	Log       Log       `yaml:"log"`
	Progress  Progress  `yaml:"progress"`
}

// Node is where the chain comes from.
type Node struct {
	Socket       string        `yaml:"socket" env:"MARLOWE_RT_NODE_SOCKET" flag:"node-socket" doc:"path of the cardano-node's local (node-to-client) socket"`
	NetworkMagic uint32        `yaml:"networkMagic" env:"MARLOWE_RT_NETWORK_MAGIC" flag:"network-magic" default:"764824073" doc:"network magic: mainnet 764824073, preprod 1, preview 2, devnet 42"`
	SystemStart  string        `yaml:"systemStart" env:"MARLOWE_RT_SYSTEM_START" flag:"system-start" doc:"for a network without a built-in slot clock (not mainnet, preprod or preview): the time slot 0 began, RFC 3339 (2025-01-01T00:00:00Z), with node.slotLength"`
	SlotLength   time.Duration `yaml:"slotLength" env:"MARLOWE_RT_SLOT_LENGTH" flag:"slot-length" doc:"for a network without a built-in slot clock: the length of its slots (1s), with node.systemStart"`
	Genesis      string        `yaml:"shelleyGenesis" env:"MARLOWE_RT_SHELLEY_GENESIS" flag:"shelley-genesis" doc:"for a network without a built-in slot clock: its Shelley genesis file, whose systemStart and slotLength give the clock (instead of node.systemStart and node.slotLength) and whose networkMagic must be node.networkMagic"`
	Start        string        `yaml:"start" env:"MARLOWE_RT_START" flag:"from" default:"origin" doc:"where to start when nothing is stored yet: origin, tip or SLOT.HASH"`
	MinBackoff   time.Duration `yaml:"minBackoff" env:"MARLOWE_RT_MIN_BACKOFF" flag:"min-backoff" default:"200ms" doc:"first wait before reconnecting to the node; it doubles after each failure"`
	MaxBackoff   time.Duration `yaml:"maxBackoff" env:"MARLOWE_RT_MAX_BACKOFF" flag:"max-backoff" default:"30s" doc:"longest wait between reconnection attempts"`
}

// Store is where history is kept.
type Store struct {
	DatabaseURL string `yaml:"databaseURL" env:"MARLOWE_RT_DATABASE_URL" flag:"database-url" secret:"true" doc:"PostgreSQL connection URL; empty keeps history in an embedded SQLite file in the data directory"`
	// ReadDatabaseURL is a reader's streaming replica of DatabaseURL.
	ReadDatabaseURL string `yaml:"readDatabaseURL" env:"MARLOWE_RT_READ_DATABASE_URL" flag:"read-database-url" secret:"true" doc:"role reader: a PostgreSQL streaming replica (physical standby) of store.databaseURL to read records and contracts from; the reader still learns of commits from store.databaseURL and serves a record only once the replica has replayed it. Empty: read store.databaseURL"`
	DataDir         string `yaml:"dataDir" env:"MARLOWE_RT_DATA_DIR" flag:"data-dir" default:"./marlowe-follower-data" doc:"directory of the embedded store"`
	// WriterLeaseTTL is the writer lease's life (storage.LeaseOptions.TTL).
	WriterLeaseTTL time.Duration `yaml:"writerLeaseTTL" env:"MARLOWE_RT_WRITER_LEASE_TTL" flag:"writer-lease-ttl" default:"10s" doc:"PostgreSQL, roles writer and all: the life of the writer lease, a row in the database the writer renews every third of this. A writer that has not renewed it within three quarters of this stops committing; a standby takes over once it has expired by the database's clock, or as soon as the holder's database session ends: the longest takeover after a writer hangs or is cut off (a writer that dies is replaced within a second, unless it reaches the database through a pooling proxy). At least 300ms"`
}

// Query is the HTTP query API.
type Query struct {
	Port          int    `yaml:"port" env:"MARLOWE_RT_QUERY_PORT" flag:"query-port" default:"3780" doc:"TCP port of the HTTP query API (0 disables it)"`
	Host          string `yaml:"host" env:"MARLOWE_RT_QUERY_HOST" flag:"query-host" doc:"address the query API listens on; empty: 127.0.0.1 (loopback) while no streaming token is set, 0.0.0.0 (every interface) once one is"`
	ReadyDistance uint64 `yaml:"readyDistance" env:"MARLOWE_RT_READY_DISTANCE" flag:"ready-distance" default:"10" doc:"readiness: the committed point at most this many blocks behind the node's tip"`
	// ReadyProjectionLag bounds the contract projection's lag for /readyz.
	ReadyProjectionLag uint64 `yaml:"readyProjectionLag" env:"MARLOWE_RT_READY_PROJECTION_LAG" flag:"ready-projection-lag" default:"100" doc:"readiness: the contract projection at most this many history records behind the history"`
	UI                 bool   `yaml:"ui" env:"MARLOWE_RT_QUERY_UI" flag:"ui" default:"true" doc:"serve the contract explorer, web pages reading the API, at / on the query port (false: the port serves the API only)"`
	// UILinks is explorer.ParseLinks's setting.
	UILinks string `yaml:"uiLinks" env:"MARLOWE_RT_QUERY_UI_LINKS" flag:"ui-links" doc:"the Cardano explorer the contract explorer links transactions, addresses and policies to: empty (cardanoscan on mainnet, preprod and preview; none on other networks, the devnet's), none, cardanoscan, cexplorer, or templates KIND=URL comma separated (kinds tx, address, policy; {id} where the identifier goes)"`
}

// Streaming is the WebSocket streaming API.
type Streaming struct {
	Port    int      `yaml:"port" env:"MARLOWE_RT_STREAMING_PORT" flag:"streaming-port" default:"3781" doc:"TCP port of the WebSocket streaming API (0 disables it)"`
	Host    string   `yaml:"host" env:"MARLOWE_RT_STREAMING_HOST" flag:"streaming-host" doc:"address the streaming API listens on; empty: 127.0.0.1 (loopback) while no streaming token is set, 0.0.0.0 (every interface) once one is"`
	Token   string   `yaml:"token" env:"MARLOWE_RT_STREAMING_TOKEN" flag:"streaming-token" secret:"true" doc:"a bearer token clients may present, the token named default (see streaming.tokens); with neither set anyone may use every stream"`
	Tokens  []string `yaml:"tokens" env:"MARLOWE_RT_STREAMING_TOKENS" flag:"streaming-tokens" secret:"true" doc:"named bearer tokens, NAME:SECRET or NAME:SECRET:SCOPE+SCOPE (comma separated; scopes subscribe, streams, admin; default subscribe+streams); a durable stream belongs to the token that created it"`
	Origins []string `yaml:"origins" env:"MARLOWE_RT_STREAMING_ORIGINS" flag:"streaming-origins" doc:"browser origins whose pages may open a WebSocket, scheme://host[:port] (comma separated), or * for any; empty: those of cors.origins. Pages of the listening address itself are allowed, and programs (no Origin header) always; the Host header never counts"`
	// QueueBudgetMB bounds the frames queued on all WebSocket connections
	// together (streaming.Config.QueueBudget).
	QueueBudgetMB uint64 `yaml:"queueBudgetMB" env:"MARLOWE_RT_STREAMING_QUEUE_BUDGET_MB" flag:"streaming-queue-budget-mb" default:"2048" doc:"MiB of frames queued for sending on all WebSocket connections together; at the budget the clients that do not read (their writes stuck longest), then those with the most queued, are closed first ('memory budget'). The default suits a 24 GiB machine"`
	// CatchUpCacheMB and CatchUpReads size the shared catch-up cache
	// (streaming.Config.CatchUpCacheBytes, CatchUpReads).
	CatchUpCacheMB uint64 `yaml:"catchUpCacheMB" env:"MARLOWE_RT_STREAMING_CATCHUP_CACHE_MB" flag:"streaming-catchup-cache-mb" default:"64" doc:"MiB of log pages kept for the streams catching up (read once, shared by every stream passing through them; the least recently used go first)"`
	CatchUpReads   int    `yaml:"catchUpReads" env:"MARLOWE_RT_STREAMING_CATCHUP_READS" flag:"streaming-catchup-reads" default:"4" doc:"catch-up reads of the database running at once, over all streams (the others wait their turn)"`
	// LeaseTTL and LeaseRetry time the round-trip leases of durable streams
	// served by several processes (streaming.Config.LeaseTTL, LeaseRetry).
	LeaseTTL   time.Duration `yaml:"leaseTTL" env:"MARLOWE_RT_STREAMING_LEASE_TTL" flag:"streaming-lease-ttl" default:"10s" doc:"on PostgreSQL: a durable stream's round-trip lease lapses after this long without renewal, so a process that died with a batch in flight holds the stream at most this long before another process serves it"`
	LeaseRetry time.Duration `yaml:"leaseRetry" env:"MARLOWE_RT_STREAMING_LEASE_RETRY" flag:"streaming-lease-retry" default:"100ms" doc:"on PostgreSQL: how long a process waits before asking again for a durable stream's lease another process holds (shorter than streaming.leaseTTL)"`
}

// StreamingTokens returns the named tokens of streaming.tokens and the
// one of streaming.token (named auth.LegacyName). Validate checked them.
func (c *Config) StreamingTokens() []auth.Token {
	toks, _ := c.streamingTokens()
	return toks
}

func (c *Config) streamingTokens() ([]auth.Token, error) {
	toks, err := auth.ParseTokens(c.Streaming.Tokens)
	if err != nil {
		return nil, err
	}
	if c.Streaming.Token != "" {
		toks = append(toks, auth.Token{Name: auth.LegacyName, Secret: c.Streaming.Token})
	}
	if _, err := auth.New(toks); err != nil {
		return nil, err
	}
	return toks, nil
}

// Open reports whether no streaming token is set: anyone who reaches the
// ports may use every stream.
func (c *Config) Open() bool { return c.Streaming.Token == "" && len(c.Streaming.Tokens) == 0 }

// ListenHost is the address a port listens on when its host setting is
// empty: loopback on an open service, every interface with tokens.
func (c *Config) ListenHost(host string) string {
	switch {
	case host != "":
		return host
	case c.Open():
		return "127.0.0.1"
	}
	return "0.0.0.0"
}

// StreamingOrigins returns the browser origins allowed on the WebSocket:
// streaming.origins, or when it is empty cors.origins.
func (c *Config) StreamingOrigins() []string {
	if len(c.Streaming.Origins) > 0 {
		return c.Streaming.Origins
	}
	return c.CORS.Origins
}

// CORS is which browser pages of other origins may use the query port.
type CORS struct {
	Origins []string `yaml:"origins" env:"MARLOWE_RT_CORS_ORIGINS" flag:"cors-origins" doc:"browser origins whose pages may read the query API, /events and /streams cross-origin, scheme://host[:port] (comma separated), or * for any; empty: none, same-origin pages only (run --devnet: * unless set)"`
}

// Log is logging.
type Log struct {
	Level  string `yaml:"level" env:"MARLOWE_RT_LOG_LEVEL" flag:"log-level" default:"info" doc:"debug, info, warn or error; per component as component=level, comma separated (for example info,chainsync=debug)"`
	Format string `yaml:"format" env:"MARLOWE_RT_LOG_FORMAT" flag:"log-format" default:"json" doc:"json (production) or console (development)"`
}

// Progress is how sync progress is shown.
type Progress struct {
	Period time.Duration `yaml:"period" env:"MARLOWE_RT_PROGRESS_PERIOD" flag:"progress-period" default:"10s" doc:"how often a progress line is logged while behind the tip"`
	Bar    string        `yaml:"bar" env:"MARLOWE_RT_PROGRESS_BAR" flag:"progress-bar" default:"auto" doc:"progress bar on the terminal: auto (when stderr is a terminal), always or never"`
}
