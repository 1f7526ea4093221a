package chainsync

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/cbor"
	"github.com/blinklabs-io/gouroboros/protocol"
	"github.com/blinklabs-io/gouroboros/protocol/handshake"
)

// Reasons of a HandshakeError, also the label of the handshake failure
// metric.
const (
	// HandshakeNetworkMagic: the node is on another network.
	HandshakeNetworkMagic = "network_magic"
	// HandshakeVersion: the node speaks none of our protocol versions.
	HandshakeVersion = "version"
	// HandshakeDecode: the node could not decode our version data.
	HandshakeDecode = "decode"
	// HandshakeRefused: the node refused for another reason, which it gave.
	HandshakeRefused = "refused"
	// HandshakeClosed: the node closed the connection during the handshake
	// without saying why.
	HandshakeClosed = "closed"
	// HandshakeTimeout: the node did not answer the handshake.
	HandshakeTimeout = "timeout"
)

// HandshakeReasons lists every HandshakeError reason.
var HandshakeReasons = []string{HandshakeNetworkMagic, HandshakeVersion, HandshakeDecode, HandshakeRefused, HandshakeClosed, HandshakeTimeout}

// handshakeTimeout bounds the handshake (node-to-client has no timeout of
// its own: a socket that accepts and never answers would hang the follower).
const handshakeTimeout = 30 * time.Second

// HandshakeError is a handshake the node refused or cut short.
type HandshakeError struct {
	Reason string
	// Magic is ours; NodeMagic the node's when known (0 otherwise).
	Magic, NodeMagic uint32
	// Version is the protocol version refused (0 when none), Supported the
	// versions the node offers on a version mismatch (node-to-client
	// numbers, without the 0x8000 flag).
	Version   uint16
	Supported []uint16
	// NodeMessage is the node's own reason, as it sent it.
	NodeMessage string
}

// Error says what happened and what to do.
func (e *HandshakeError) Error() string {
	setting := "node.networkMagic (MARLOWE_RT_NETWORK_MAGIC, --network-magic)"
	switch e.Reason {
	case HandshakeNetworkMagic:
		if e.NodeMagic != 0 {
			return fmt.Sprintf("handshake refused: network magic %d does not match the node's (%s); set %s to %d",
				e.Magic, magicName(e.NodeMagic), setting, e.NodeMagic)
		}
		msg := fmt.Sprintf("handshake refused: network magic %d does not match the node's; set %s to the node's network "+
			"(mainnet 764824073, preprod 1, preview 2)", e.Magic, setting)
		if e.NodeMessage != "" {
			msg += "; the node said: " + e.NodeMessage
		}
		return msg
	case HandshakeVersion:
		return fmt.Sprintf("handshake refused: the node speaks none of our node-to-client versions %s (it offers %s)",
			versionList(ourVersions()), versionList(e.Supported))
	case HandshakeDecode:
		return fmt.Sprintf("handshake refused: the node could not decode our version data of node-to-client version %d: %s", e.Version, e.NodeMessage)
	case HandshakeRefused:
		return fmt.Sprintf("handshake refused by the node (node-to-client version %d): %s", e.Version, e.NodeMessage)
	case HandshakeTimeout:
		return fmt.Sprintf("the node did not answer the handshake within %s", handshakeTimeout)
	}
	return fmt.Sprintf("the node closed the connection during the handshake without saying why; the usual cause is "+
		"network magic %d not being the node's: check %s", e.Magic, setting)
}

func magicName(m uint32) string {
	switch m {
	case MagicMainnet:
		return "764824073, mainnet"
	case MagicPreprod:
		return "1, preprod"
	case MagicPreview:
		return "2, preview"
	}
	return strconv.FormatUint(uint64(m), 10)
}

func ourVersions() []uint16 {
	var out []uint16
	for _, v := range protocol.GetProtocolVersionsNtC() {
		out = append(out, v&^protocol.ProtocolVersionNtCOffset)
	}
	return out
}

func versionList(vs []uint16) string {
	if len(vs) == 0 {
		return "none"
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, ", ")
}

// recordingConn keeps what the node sent until the handshake is over:
// gouroboros may report a refused handshake only as the connection closing
// (the refusal and the close race in the library), while the refusal is in
// these bytes.
type recordingConn struct {
	net.Conn
	on  atomic.Bool
	mu  sync.Mutex
	buf []byte
}

const maxRecorded = 64 << 10

func newRecordingConn(c net.Conn) *recordingConn {
	r := &recordingConn{Conn: c}
	r.on.Store(true)
	return r
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.on.Load() {
		c.mu.Lock()
		if len(c.buf) < maxRecorded {
			c.buf = append(c.buf, p[:min(n, maxRecorded-len(c.buf))]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// stop ends the recording and returns what was recorded.
func (c *recordingConn) stop() []byte {
	c.on.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	c.buf = nil
	return b
}

// handshakeMessage returns the handshake message the node sent in the
// recorded bytes, or nil.
func handshakeMessage(rec []byte) protocol.Message {
	var payload []byte
	for len(rec) >= 8 {
		id := binary.BigEndian.Uint16(rec[4:6]) &^ 0x8000
		n := int(binary.BigEndian.Uint16(rec[6:8]))
		if len(rec) < 8+n {
			break
		}
		if id == handshake.ProtocolId {
			payload = append(payload, rec[8:8+n]...)
		}
		rec = rec[8+n:]
	}
	if len(payload) == 0 {
		return nil
	}
	typ, err := cbor.DecodeIdFromList(payload)
	if err != nil || typ < 0 {
		return nil
	}
	msg, err := handshake.NewMsgFromCbor(uint(typ), payload)
	if err != nil {
		return nil
	}
	return msg
}

var magicInText = regexp.MustCompile(`(?i)(?:unNetworkMagic\s*=\s*|magic\D{0,3})(\d{1,10})`)

// refusalError reads a Refuse message's reason.
func refusalError(magic uint32, reason []any) *HandshakeError {
	e := &HandshakeError{Reason: HandshakeRefused, Magic: magic}
	if len(reason) == 0 {
		return e
	}
	code, _ := asUint(reason[0])
	if len(reason) > 1 {
		if code == handshake.RefuseReasonVersionMismatch {
			if vs, ok := reason[1].([]any); ok {
				for _, v := range vs {
					if n, ok := asUint(v); ok {
						e.Supported = append(e.Supported, uint16(n)&^protocol.ProtocolVersionNtCOffset)
					}
				}
			}
		} else if v, ok := asUint(reason[1]); ok {
			e.Version = uint16(v) &^ protocol.ProtocolVersionNtCOffset
		}
	}
	if len(reason) > 2 {
		e.NodeMessage = fmt.Sprint(reason[2])
	}
	switch code {
	case handshake.RefuseReasonVersionMismatch:
		e.Reason = HandshakeVersion
		slices.Sort(e.Supported)
	case handshake.RefuseReasonDecodeError:
		e.Reason = HandshakeDecode
	default:
		text := strings.ToLower(e.NodeMessage)
		if strings.Contains(text, "magic") || strings.Contains(text, "version data mismatch") {
			e.Reason = HandshakeNetworkMagic
			// cardano-node names both magics ("... unNetworkMagic = 1 ...
			// /= ... unNetworkMagic = 764824073 ..."): the node's is the other.
			for _, m := range magicInText.FindAllStringSubmatch(e.NodeMessage, -1) {
				if n, err := strconv.ParseUint(m[1], 10, 32); err == nil && uint32(n) != magic {
					e.NodeMagic = uint32(n)
					break
				}
			}
		}
	}
	return e
}

func asUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case int64:
		return uint64(n), n >= 0
	case uint32:
		return uint64(n), true
	case uint16:
		return uint64(n), true
	case uint8:
		return uint64(n), true
	case int:
		return uint64(n), n >= 0
	}
	return 0, false
}

// diagnoseHandshake turns a failed handshake into a HandshakeError: the
// node's refusal when it sent one, else (the connection closed, or a
// refusal that does not say why) what a handshake query tells of the
// node's network.
func (f *Follower) diagnoseHandshake(libErr error, rec []byte) *HandshakeError {
	var e *HandshakeError
	switch msg := handshakeMessage(rec).(type) {
	case *handshake.MsgRefuse:
		e = refusalError(f.cfg.NetworkMagic, msg.Reason)
	default:
		var refused *handshake.RefusedError
		var mismatch *handshake.VersionMismatchError
		var decode *handshake.DecodeError
		switch {
		case errors.As(libErr, &refused):
			e = refusalError(f.cfg.NetworkMagic, []any{handshake.RefuseReasonRefused, uint64(refused.Version), refused.Message})
		case errors.As(libErr, &mismatch):
			vs := make([]any, len(mismatch.SupportedVersions))
			for i, v := range mismatch.SupportedVersions {
				vs[i] = uint64(v)
			}
			e = refusalError(f.cfg.NetworkMagic, []any{handshake.RefuseReasonVersionMismatch, vs})
		case errors.As(libErr, &decode):
			e = refusalError(f.cfg.NetworkMagic, []any{handshake.RefuseReasonDecodeError, uint64(decode.Version), decode.Message})
		case errors.Is(libErr, errHandshakeTimeout):
			return &HandshakeError{Reason: HandshakeTimeout, Magic: f.cfg.NetworkMagic}
		default:
			e = &HandshakeError{Reason: HandshakeClosed, Magic: f.cfg.NetworkMagic}
		}
	}
	if e.NodeMagic == 0 && (e.Reason == HandshakeNetworkMagic || e.Reason == HandshakeClosed || e.Reason == HandshakeRefused) {
		if m, ok := f.queryNodeMagic(); ok && m != f.cfg.NetworkMagic {
			e.Reason, e.NodeMagic = HandshakeNetworkMagic, m
		}
	}
	return e
}

var errHandshakeTimeout = errors.New("handshake timed out")

// queryNodeMagic asks the node for its versions with a handshake query
// (node-to-client v15 and later) and returns its network magic.
func (f *Follower) queryNodeMagic() (uint32, bool) {
	nc, err := net.DialTimeout("unix", f.cfg.SocketPath, 5*time.Second)
	if err != nil {
		return 0, false
	}
	rec := newRecordingConn(nc)
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	conn, err := ouroboros.NewConnection(
		ouroboros.WithConnection(rec),
		ouroboros.WithNetworkMagic(f.cfg.NetworkMagic),
		ouroboros.WithNodeToNode(false),
		ouroboros.WithQueryMode(true),
	)
	if err == nil {
		_ = conn.Close()
	}
	_ = nc.Close()
	reply, ok := handshakeMessage(rec.stop()).(*handshake.MsgQueryReply)
	if !ok {
		return 0, false
	}
	for _, v := range slices.Backward(slices.Sorted(maps.Keys(reply.VersionMap))) {
		newData := protocol.GetProtocolVersion(v).NewVersionDataFromCborFunc
		if newData == nil {
			continue
		}
		if vd, err := newData(reply.VersionMap[v]); err == nil && vd != nil {
			return vd.NetworkMagic(), true
		}
	}
	return 0, false
}
