package devnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/blinklabs-io/gouroboros/cbor"
	"github.com/blinklabs-io/gouroboros/protocol"
	"github.com/blinklabs-io/gouroboros/protocol/handshake"
)

// handshakeTimeout bounds how long a client may take to propose versions.
const handshakeTimeout = 30 * time.Second

// screenHandshake reads the client's ProposeVersions and answers it itself
// when the answer ends the connection: a handshake query (MsgQueryReply
// with the node's versions and network magic), no common version (Refuse
// VersionMismatch), version data it cannot decode (Refuse HandshakeDecodeError)
// or another network magic (Refuse Refused, worded as cardano-node words
// it). gouroboros' server closes the connection before its refusal reaches
// the socket, so a client would see only the connection closing; cardano-node
// sends the refusal, and so does this. An acceptable proposal is handed to
// the library: the returned connection reads the proposal again first.
// refused is the reason when the node answered (the caller closes nc).
func screenHandshake(nc net.Conn, magic uint32) (conn net.Conn, refused string, err error) {
	_ = nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	var hdr [8]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return nil, "", err
	}
	payload := make([]byte, binary.BigEndian.Uint16(hdr[6:8]))
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, "", err
	}
	replay := &replayConn{Conn: nc, r: io.MultiReader(bytes.NewReader(append(hdr[:], payload...)), nc)}
	if binary.BigEndian.Uint16(hdr[4:6])&0x7fff != handshake.ProtocolId {
		return replay, "", nil
	}
	if id, err := cbor.DecodeIdFromList(payload); err != nil || id != handshake.MessageTypeProposeVersions {
		return replay, "", nil // the library reports it
	}
	msg, err := handshake.NewMsgFromCbor(handshake.MessageTypeProposeVersions, payload)
	if err != nil {
		return replay, "", nil
	}
	proposed := msg.(*handshake.MsgProposeVersions).VersionMap
	ours := protocol.GetProtocolVersionMap(protocol.ProtocolModeNodeToClient, magic, protocol.DiffusionModeInitiatorOnly, false, false)
	for v, data := range proposed {
		if _, ok := ours[v]; !ok {
			continue
		}
		if vd, err := protocol.GetProtocolVersion(v).NewVersionDataFromCborFunc(data); err == nil && vd != nil && vd.Query() {
			return nil, "handshake query", writeHandshake(nc, handshake.NewMsgQueryReply(ours))
		}
	}
	var common []uint16
	for v := range proposed {
		if _, ok := ours[v]; ok {
			common = append(common, v)
		}
	}
	if len(common) == 0 {
		supported := make([]any, 0, len(ours))
		for _, v := range slices.Sorted(maps.Keys(ours)) {
			supported = append(supported, uint64(v))
		}
		return nil, "no common version", writeHandshake(nc, handshake.NewMsgRefuse([]any{handshake.RefuseReasonVersionMismatch, supported}))
	}
	v := slices.Max(common)
	vd, err := protocol.GetProtocolVersion(v).NewVersionDataFromCborFunc(proposed[v])
	if err != nil || vd == nil {
		why := "empty version data"
		if err != nil {
			why = err.Error()
		}
		return nil, "undecodable version data", writeHandshake(nc, handshake.NewMsgRefuse([]any{handshake.RefuseReasonDecodeError, uint64(v), why}))
	}
	if vd.NetworkMagic() != magic {
		text := fmt.Sprintf("version data mismatch: NodeToClientVersionData {networkMagic = NetworkMagic {unNetworkMagic = %d}, query = False}"+
			" /= NodeToClientVersionData {networkMagic = NetworkMagic {unNetworkMagic = %d}, query = False}", magic, vd.NetworkMagic())
		return nil, fmt.Sprintf("network magic %d", vd.NetworkMagic()),
			writeHandshake(nc, handshake.NewMsgRefuse([]any{handshake.RefuseReasonRefused, uint64(v), text}))
	}
	return replay, "", nil
}

// writeHandshake sends one handshake message as the responder.
func writeHandshake(nc net.Conn, msg protocol.Message) error {
	payload, err := cbor.Encode(msg)
	if err != nil {
		return err
	}
	if len(payload) > 0xffff {
		return errors.New("handshake message too long")
	}
	buf := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint32(buf[0:4], uint32(time.Now().UnixMicro()))
	binary.BigEndian.PutUint16(buf[4:6], handshake.ProtocolId|0x8000)
	binary.BigEndian.PutUint16(buf[6:8], uint16(len(payload)))
	_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err = nc.Write(append(buf, payload...))
	return err
}

// replayConn reads the bytes screenHandshake consumed, then the connection.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
