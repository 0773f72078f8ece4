package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
)

// streamFlags are `wasmhooks chain`'s streaming flags.
type streamFlags struct {
	stream bool
	chunk  int
}

// maxStreamChunks bounds the chunks --stream makes of its input (and the
// lines it prints).
const maxStreamChunks = 100_000

func (f *streamFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.stream, "stream", false, "stream the input's primary field through a streaming point (llm.output.stream, message.outbound.stream) in chunks, printing what each chunk releases")
	fs.IntVar(&f.chunk, "chunk", 16, "with --stream: the characters per chunk")
}

// runStream writes the primary field of in.Context to a chain.Stream in
// chunks of f.chunk characters and prints each chunk with the text it
// released, then the stream's outcome.
func runStream(ctx context.Context, env *chainEnv, f *streamFlags, in chain.Input, stdout io.Writer) int {
	p, _ := abi.LookupPoint(in.Point)
	if !abi.IsStreamPoint(in.Point) {
		return fail(stdout, exitUsage, "usage", "--stream needs a streaming point (llm.output.stream, message.outbound.stream), not %s", in.Point)
	}
	if f.chunk < 1 {
		return fail(stdout, exitUsage, "usage", "--chunk must be at least 1")
	}
	text, ok := in.Context[p.Primary].(string)
	if !ok {
		return fail(stdout, exitUsage, "invalid_input", "--stream: the input's %q must be a string (the whole reply, to be sent in chunks)", p.Primary)
	}
	rest := make(map[string]any, len(in.Context))
	for k, v := range in.Context {
		if k != p.Primary && k != "offset" && k != "final" {
			rest[k] = v
		}
	}
	in.Context = rest
	s, err := env.c.Stream(ctx, in)
	if err != nil {
		return fail(stdout, exitUsage, chainCode(err), "%v", err)
	}
	type chunk struct {
		Chunk    string `json:"chunk"`
		Released string `json:"released"`
	}
	doc := struct {
		Chunks   []chunk `json:"chunks"`
		Final    string  `json:"released_at_close"`
		Verdict  string  `json:"verdict"`
		Binding  string  `json:"binding,omitempty"`
		Reason   string  `json:"reason,omitempty"`
		Modified bool    `json:"modified"`
		Runs     int     `json:"runs"`
		Text     string  `json:"text"`
		Cut      bool    `json:"text_truncated,omitempty"`
	}{Chunks: []chunk{}}
	runes := []rune(text)
	if (len(runes)+f.chunk-1)/f.chunk > maxStreamChunks {
		return fail(stdout, exitUsage, "usage", "--chunk %d makes more than %d chunks", f.chunk, maxStreamChunks)
	}
	for i := 0; i < len(runes); i += f.chunk {
		c := string(runes[i:min(i+f.chunk, len(runes))])
		r, err := s.Write(c)
		doc.Chunks = append(doc.Chunks, chunk{Chunk: c, Released: r})
		var stopped *chain.StreamStopped
		if errors.As(err, &stopped) {
			break // a guard stopped it: Close reports the verdict
		}
		if err != nil {
			return fail(stdout, exitUsage, streamCode(err), "%v", err)
		}
	}
	r, out, err := s.Close()
	if err != nil {
		return fail(stdout, exitUsage, streamCode(err), "%v", err)
	}
	doc.Final, doc.Verdict, doc.Binding, doc.Reason = r, string(out.Verdict), out.Binding, out.Reason
	doc.Modified, doc.Runs, doc.Text, doc.Cut = out.Modified, out.Runs, out.Text, out.TextTruncated
	printJSON(stdout, doc)
	return exitOK
}

// streamCode is the stable code of a Stream's error.
func streamCode(err error) string {
	if errors.Is(err, chain.ErrStreamTooLarge) {
		return "stream_too_large"
	}
	return chainCode(err)
}
