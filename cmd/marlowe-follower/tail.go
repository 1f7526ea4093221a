package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// tailOptions are the tail command's own flags.
type tailOptions struct {
	filter    protocol.Filter
	contracts []string // --contract, the alias of --contract-id
	roles     []string
	from      string
	durable   string
	url       string
	batchSize int
	limit     int
}

func newTailCommand() *cobra.Command {
	var o tailOptions
	cmd := &cobra.Command{
		Use:   "tail [--contract-id ID]... [--role-currency P]... [--tag T]... [--party-address A]... [--party-role P.NAME]... [--kind K]... [--all] [--from origin|tip|SEQ] [--durable NAME] [--url ws://HOST:PORT/]",
		Short: "Print the Marlowe history from a running service as JSON lines, then follow it",
		Long: "Subscribe to a running marlowe-follower's streaming API and print its history records as JSON\n" +
			"lines on stdout: first the records current now (or those after --from), then every new one as it\n" +
			"is committed. Rollbacks print their rolled_back record on stdout and a line on stderr. The\n" +
			"connection is re-established after a failure and resumes where it stopped; records are printed\n" +
			"once. With --durable NAME the position is kept by the server: a later tail --durable NAME\n" +
			"continues after the last record printed.\n\n" +
			"The filter flags are the filter vocabulary of the query API, GET /events and the WebSocket\n" +
			"(docs/query.md, \"Filters\"): --contract-id (contractId; --contract is an alias), --role-currency\n" +
			"(roleCurrency), --tag, --party-address (partyAddress), --party-role (partyRole, POLICY.NAME),\n" +
			"--kind and --all, each repeatable. Values of one flag are OR-ed, flags are AND-ed, except that\n" +
			"--party-address and --party-role are OR-ed together.",
		Args: exactArgs(0),
		RunE: withConfig(func(cmd *cobra.Command, l *config.Loaded) error {
			req, err := o.request()
			if err != nil {
				return err
			}
			url := o.url
			if url == "" {
				url = streamingURL(&l.Config.Streaming)
			}
			ctx, log, done, err := startCommand(cmd, l)
			if err != nil {
				return err
			}
			defer done()
			c, err := client.New(client.Options{URL: url, Token: l.Config.Streaming.Token, Logger: log})
			if err != nil {
				return usageError{err}
			}
			defer c.Close()
			return tail(ctx, c, req, o.limit, url, cmd.OutOrStdout(), cmd.ErrOrStderr())
		}),
	}
	// The settings tail uses, not the streaming server's others (origins,
	// named tokens, the queue budget), which a client has no use for.
	config.RegisterFlags(cmd.Flags(), "streaming.host", "streaming.port", "streaming.token", "log")
	f := cmd.Flags()
	f.Lookup("streaming-host").Usage = "host of the service's streaming API, for the default --url; empty or 0.0.0.0: 127.0.0.1 (MARLOWE_RT_STREAMING_HOST)"
	f.Lookup("streaming-port").Usage = "port of the service's streaming API, for the default --url (MARLOWE_RT_STREAMING_PORT)"
	f.Lookup("streaming-token").Usage = "the bearer token to present: the secret of the token tail acts as (streaming.token or one of streaming.tokens) (MARLOWE_RT_STREAMING_TOKEN)"
	f.StringArrayVar(&o.filter.Contracts, "contract-id", nil, "a contract id (TXID#INDEX); repeatable")
	f.StringArrayVar(&o.contracts, "contract", nil, "alias of --contract-id")
	f.StringArrayVar(&o.filter.RolesCurrencies, "role-currency", nil, "a roles currency policy id (56 hex digits; empty: contracts without roles); repeatable")
	f.StringArrayVar(&o.filter.Tags, "tag", nil, "a Marlowe metadata tag; repeatable")
	f.StringArrayVar(&o.filter.PartyAddresses, "party-address", nil, "a party's bech32 address; repeatable")
	f.StringArrayVar(&o.roles, "party-role", nil, "a role party as POLICY.NAME; repeatable")
	f.StringArrayVar(&o.filter.Kinds, "kind", nil, "a record kind (contract_created, inputs_applied, payout_withdrawn, apply_inputs_rejected, rolled_back); repeatable")
	f.BoolVar(&o.filter.All, "all", false, "every record")
	f.StringVar(&o.from, "from", "origin", "where to start: origin (the current records, then new ones), tip (new ones only), or a seq or cursor from an earlier run")
	f.StringVar(&o.durable, "durable", "", "use (or create) the server-side durable stream NAME, which remembers the position")
	f.StringVar(&o.url, "url", "", "the streaming API's URL (default ws://HOST:PORT/ from --streaming-host and --streaming-port)")
	f.IntVar(&o.batchSize, "batch-size", 0, "records per batch (0: the server's default)")
	f.IntVar(&o.limit, "limit", 0, "exit after printing this many records (0: follow until interrupted); the records printed are acknowledged, the rest of their batch is not")
	return cmd
}

// request checks the flags and builds the subscription.
func (o *tailOptions) request() (client.Request, error) {
	o.filter.Contracts = append(o.filter.Contracts, o.contracts...)
	for _, s := range o.roles {
		r, err := protocol.ParseRole(s)
		if err != nil {
			return client.Request{}, usageErrorf("--party-role %q: want POLICY.NAME", s)
		}
		o.filter.PartyRoles = append(o.filter.PartyRoles, r)
	}
	empty := o.filter.Empty()
	if empty && o.durable == "" {
		return client.Request{}, usageErrorf("choose the records: --all, or --contract-id, --role-currency, --tag, --party-address, --party-role, --kind")
	}
	if !empty {
		if _, err := o.filter.History(); err != nil {
			return client.Request{}, usageError{err}
		}
	}
	if _, err := protocol.ParseFrom(o.from); err != nil {
		return client.Request{}, usageError{fmt.Errorf("--from: %w", err)}
	}
	if o.durable != "" && !protocol.ValidDurableName(o.durable) {
		return client.Request{}, usageErrorf("--durable %q: use 1 to 100 of the characters A-Z a-z 0-9 . _ -", o.durable)
	}
	if o.batchSize < 0 || o.limit < 0 {
		return client.Request{}, usageErrorf("--batch-size and --limit must not be negative")
	}
	name := "tail"
	if o.durable != "" {
		name = o.durable
	}
	return client.Request{Stream: name, Filter: o.filter, From: o.from, Durable: o.durable != "",
		BatchSize: o.batchSize, SkipSeen: true}, nil
}

// streamingURL is the local service's streaming endpoint.
func streamingURL(s *config.Streaming) string {
	host := s.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "ws://" + net.JoinHostPort(host, strconv.Itoa(s.Port)) + "/"
}

// tail prints records until ctx ends or limit records were printed.
func tail(ctx context.Context, c *client.Client, req client.Request, limit int, url string, stdout, stderr io.Writer) error {
	waiting := time.AfterFunc(3*time.Second, func() {
		fmt.Fprintf(stderr, "marlowe-follower tail: waiting for the streaming API at %s\n", url)
	})
	s, err := c.Subscribe(ctx, req)
	waiting.Stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	out := bufio.NewWriter(stdout)
	printed := 0
	for {
		b, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n := len(b.Records)
		if limit > 0 {
			n = min(n, limit-printed)
		}
		for i := range n {
			r := &b.Records[i]
			writeLine(out, b.Raw[i])
			if r.Kind == record.KindRolledBack {
				if err := out.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(stderr, rollbackLine(r))
			}
		}
		printed += n
		if err := out.Flush(); err != nil {
			return err
		}
		// A batch cut short by --limit is acknowledged up to the last
		// record printed: the rest comes next time.
		var aerr error
		switch {
		case n == len(b.Records):
			aerr = s.Ack(ctx, b)
		case n > 0:
			aerr = s.AckUpTo(ctx, b, b.Records[n-1].Seq)
		}
		if aerr != nil && !errors.Is(aerr, context.Canceled) {
			return aerr
		}
		if limit > 0 && printed >= limit {
			return nil
		}
	}
}

// writeLine writes a record's JSON as the server sent it, on one line
// (JSON lines: a server that wrote it on several is compacted).
func writeLine(out *bufio.Writer, raw []byte) {
	if bytes.ContainsAny(raw, "\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			raw = b.Bytes()
		}
	}
	out.Write(raw)
	out.WriteByte('\n')
}

// rollbackLine describes a rollback for a person.
func rollbackLine(r *record.Record) string {
	var rb record.RolledBack
	if err := json.Unmarshal(r.Payload, &rb); err != nil {
		return fmt.Sprintf("marlowe-follower tail: ROLLBACK (seq %d)", r.Seq)
	}
	return fmt.Sprintf("marlowe-follower tail: ROLLBACK to %s (seq %d): the records of later blocks printed before are undone",
		rb.To, r.Seq)
}
