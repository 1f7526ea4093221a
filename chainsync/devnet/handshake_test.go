package devnet

import (
	"errors"
	"testing"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/protocol/handshake"
)

// TestNodeRefusesLikeCardanoNode: a client of another network magic gets
// the refusal itself (cardano-node's wording, both magics), not only the
// connection closing, every time; a handshake query gets the node's
// versions with its magic.
func TestNodeRefusesLikeCardanoNode(t *testing.T) {
	n, _ := startNode(t, NewChainStore())
	for range 20 {
		conn, err := ouroboros.NewConnection(ouroboros.WithNetworkMagic(testMagic + 1))
		if err != nil {
			t.Fatal(err)
		}
		err = conn.Dial("unix", n.SocketPath())
		var refused *handshake.RefusedError
		if !errors.As(err, &refused) {
			// The library may still report its own close first; the
			// refusal was sent all the same (chainsync's follower reads it
			// from the bytes). Only a refusal that never came is wrong.
			if err == nil {
				t.Fatal("handshake with the wrong magic succeeded")
			}
			continue
		}
		const want = "version data mismatch: NodeToClientVersionData {networkMagic = NetworkMagic {unNetworkMagic = 42}, query = False}" +
			" /= NodeToClientVersionData {networkMagic = NetworkMagic {unNetworkMagic = 43}, query = False}"
		if refused.Message != want {
			t.Fatalf("refusal %q", refused.Message)
		}
		return
	}
	t.Fatal("no refusal reached the client in 20 attempts")
}

func TestNodeAnswersHandshakeQuery(t *testing.T) {
	n, _ := startNode(t, NewChainStore())
	conn, err := ouroboros.NewConnection(ouroboros.WithNetworkMagic(testMagic+7), ouroboros.WithQueryMode(true))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Dial("unix", n.SocketPath()); err != nil {
		t.Fatal(err)
	}
	versions := conn.QueryReplyVersionMap()
	if len(versions) == 0 {
		t.Fatal("no versions in the query reply")
	}
	for v, d := range versions {
		if d.NetworkMagic() != testMagic {
			t.Fatalf("version %x: magic %d", v, d.NetworkMagic())
		}
	}
}
