package runtime

import "sync"

// docBuffers holds the buffers invocation documents are encoded into.
var docBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledDoc bounds the buffers docBuffers keeps.
const maxPooledDoc = 64 << 10

func putDocBuffer(b *[]byte) {
	if cap(*b) <= maxPooledDoc {
		*b = (*b)[:0]
		docBuffers.Put(b)
	}
}
