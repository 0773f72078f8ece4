package kvtest_test

import (
	"testing"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/capability/builtin/kvtest"
)

func TestMemoryKVConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kvtest.Harness {
		return kvtest.Harness{Store: &builtin.MemoryKV{MaxKeysPerScope: 20}, MaxKeysPerScope: 20}
	})
}
