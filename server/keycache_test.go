package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestNodesRevokedKeyCachedElsewhere: a key node 2 has cached (a long TTL,
// so only the notification can make it forget) is refused there within a
// second of node 1 revoking it, and a rotated key's old secret likewise.
func TestNodesRevokedKeyCachedElsewhere(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, func(_ int, o *server.Options) { o.KeyCacheTTL = time.Hour })
	n1, n2 := c.nodes[0], c.nodes[1]
	n1.createTenant(t, "acme", false)
	for _, retire := range []string{"revoke", "rotate"} {
		k, err := n1.admin.CreateKey(ctx, server.RoleOperator, "acme")
		if err != nil {
			t.Fatal(err)
		}
		key := client.New(n2.hs.URL, k.Key)
		if _, err := key.Me(ctx); err != nil { // cached on node 2 now
			t.Fatal(err)
		}
		if _, err := client.New(n1.hs.URL, k.Key).Me(ctx); err != nil {
			t.Fatal(err)
		}
		retireKey(t, n1.admin, retire, k.ID)
		// At once on the node that retired it.
		_, err = client.New(n1.hs.URL, k.Key).Me(ctx)
		wantCode(t, err, 401, server.CodeUnauthenticated)
		retired := time.Now()
		for {
			_, err := key.Me(ctx)
			if err != nil {
				wantCode(t, err, 401, server.CodeUnauthenticated)
				break
			}
			if time.Since(retired) > time.Second {
				t.Fatalf("%s: node 2 still takes the key %s after node 1 retired it", retire, time.Since(retired))
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("%s: node 2 refused the key %s after node 1 retired it", retire, time.Since(retired))
	}
}
