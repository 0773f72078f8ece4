package interceptor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/bodydeadline"
)

// The SEP's methods as the official Go SDK serves them. The SDK dispatches
// only the methods of the MCP specification (its method table is closed), so
// each SEP method is a tool of the same name with '/' written '.': its
// arguments are the method's params, its structured content the method's
// result, and an RPC failure (an unknown interceptor: -32602) is the
// JSON-RPC error of the tools/call. The server declares the SEP's
// capability, {"interceptor": {"supportedEvents": [...]}}, under
// "experimental".
const (
	ToolList   = "interceptors.list"
	ToolInvoke = "interceptor.invoke"
	ToolChain  = "interceptor.executeChain"
)

// ServerName is the MCP server's implementation name.
const ServerName = "wasmhooks-interceptors"

// MaxCallsInFlight bounds the invocations and chain executions a server runs
// at once, over all its sessions and transports: each holds its decoded
// payload (an HTTP body is up to 4 MiB, a stdio frame 16 MiB). Past it, a
// call of an HTTP session is refused at once (CodeBusy); one over stdio,
// whose one client is the process that started the server, waits for a
// slot (or its cancellation). The HTTP transport cannot bound this itself:
// a client that disconnects ends its POST, not its call.
const MaxCallsInFlight = 32

// CodeBusy is the JSON-RPC error of a call refused because MaxCallsInFlight
// calls are running (an implementation-defined server error).
const CodeBusy = -32005

// callSlots are the calls in flight, one token each.
type callSlots chan struct{}

// acquire takes a slot, waiting for one (until ctx ends) if wait, and
// returns its release; else the refusal.
func (s callSlots) acquire(ctx context.Context, wait bool) (release func(), err error) {
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	default:
	}
	busy := &jsonrpc.Error{Code: CodeBusy, Message: fmt.Sprintf("server busy: %d calls in flight (the bound)", cap(s))}
	if !wait {
		return nil, busy
	}
	select {
	case s <- struct{}{}:
		return func() { <-s }, nil
	case <-ctx.Done():
		return nil, busy
	}
}

// NewServer returns an MCP server of the executor's interceptors. version
// is the implementation version it reports.
func NewServer(x *Executor, version string) *mcp.Server {
	return newServer(x, version, make(callSlots, MaxCallsInFlight))
}

func newServer(x *Executor, version string, slots callSlots) *mcp.Server {
	events := map[string]bool{}
	for _, d := range x.cfg.Interceptors {
		for _, e := range d.Events {
			events[e] = true
		}
	}
	supported := make([]string, 0, len(events))
	for e := range events {
		supported = append(supported, e)
	}
	sort.Strings(supported)
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:        &mcp.ToolCapabilities{},
			Experimental: map[string]any{"interceptor": map[string]any{"supportedEvents": supported}},
		},
	})
	mcp.AddTool(s, &mcp.Tool{Name: ToolList, Description: "interceptors/list (SEP-2624): the interceptors, those hooking params.event if set."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ ListParams) (*mcp.CallToolResult, any, error) {
			var p ListParams
			if err := decode(req, &p); err != nil {
				return nil, nil, err
			}
			return nil, x.List(p.Event), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: ToolInvoke, Description: "interceptor/invoke (SEP-2624): one interceptor over a payload; a ValidationResult or a MutationResult."},
		runTool(slots, func(p *InvokeParams) **InvocationContext { return &p.Context }, x.Invoke))
	mcp.AddTool(s, &mcp.Tool{Name: ToolChain, Description: "Runs one lifecycle event through every interceptor hooking it, in the SEP's trust-boundary order; a ChainExecutionResult."},
		runTool(slots, func(p *ChainParams) **InvocationContext { return &p.Context }, x.Chain))
	return s
}

// runTool is the handler of a tool that runs hooks: it takes a slot of
// slots (an HTTP session's call refused when there is none, a stdio one
// waiting), decodes the arguments into P, defaults the invocation context
// that field points at to the MCP session (withSession), and answers run's
// result or error.
func runTool[P, R any](slots callSlots, field func(*P) **InvocationContext, run func(context.Context, P) (R, *Error)) mcp.ToolHandlerFor[P, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, _ P) (*mcp.CallToolResult, any, error) {
		release, err := slots.acquire(ctx, req.Session == nil || req.Session.ID() == "")
		if err != nil {
			return nil, nil, err
		}
		defer release()
		var p P
		err = decode(req, &p)
		if err != nil {
			return nil, nil, err
		}
		c := field(&p)
		if *c, err = withSession(*c, req); err != nil {
			return nil, nil, err
		}
		r, e := run(ctx, p)
		if e != nil {
			return nil, nil, wireError(e)
		}
		return nil, r, nil
	}
}

// maxArgumentsDepth is the nesting a call's arguments may have: a hook reads
// its invocation document to abi.DefaultMaxJSONDepth, and the payload sits
// one level deeper there ({"context": {"arguments": P}}) than in the
// arguments ({"payload": P}).
const maxArgumentsDepth = abi.DefaultMaxJSONDepth - 1

// decode reads the tool's arguments into p, numbers kept exact
// (json.Number), as the payload reaches the hooks. The arguments must be
// JSON a hook reads (abi.ParseJSON, to maxArgumentsDepth): what it could not
// read would fail every hook, letting the call through every fail-open one,
// and of duplicate keys the hooks would see the last where the server the
// call goes to may read the first. Else CodeInvalidParams.
func decode(req *mcp.CallToolRequest, p any) error {
	raw := req.Params.Arguments
	if len(raw) == 0 {
		return nil
	}
	if _, err := abi.ParseJSON(raw, abi.JSONLimits{MaxBytes: len(raw), MaxDepth: maxArgumentsDepth}); err != nil {
		return &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("invalid params: %v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(p); err != nil {
		return &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("invalid params: %v", err)}
	}
	return nil
}

// sessionPrefix starts the sessionIds withSession derives from the MCP
// session; a client may not name one itself.
const sessionPrefix = "mcp-session:"

// withSession defaults the invocation context's sessionId to the MCP
// session's id (the streamable HTTP transport's Mcp-Session-Id), so a
// client that sends none still keeps its taint apart from other clients'.
// A sessionId the client sends is its own name for its session, but the
// derived names are reserved: a client that sent "mcp-session:ID" of
// another client's connection would read and overwrite that client's
// taint, so one that is not the caller's own is CodeInvalidParams.
func withSession(c *InvocationContext, req *mcp.CallToolRequest) (*InvocationContext, error) {
	id := ""
	if req.Session != nil {
		id = req.Session.ID()
	}
	if c != nil && c.SessionID != "" {
		if strings.HasPrefix(c.SessionID, sessionPrefix) && (id == "" || c.SessionID != sessionPrefix+id) {
			return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("invalid params: sessionId %q: the prefix %q is reserved for the MCP session's own id", c.SessionID, sessionPrefix)}
		}
		return c, nil
	}
	if id == "" {
		return c, nil
	}
	out := InvocationContext{}
	if c != nil {
		out = *c
	}
	out.SessionID = sessionPrefix + id
	return &out, nil
}

func wireError(e *Error) error {
	var data json.RawMessage
	if e.Data != nil {
		data, _ = json.Marshal(e.Data)
	}
	return &jsonrpc.Error{Code: int64(e.Code), Message: e.Message, Data: data}
}

// Bounds of the streamable HTTP transport, where any client that reaches
// the address (and holds HTTPOptions.Token, when there is one) opens
// sessions: each is kept (with its goroutines and buffers) until the client
// deletes it.
const (
	// DefaultMaxHTTPSessions is the sessions HTTPHandler keeps open when
	// HTTPOptions.MaxSessions is zero; one more is refused with 503.
	DefaultMaxHTTPSessions = 1024
	// DefaultHTTPSessionIdle is how long a session may go without a
	// request before it is closed, when HTTPOptions.SessionIdle is zero.
	DefaultHTTPSessionIdle = 30 * time.Minute
	// DefaultHTTPBodyTimeout bounds the time a request's body takes to
	// arrive, from the request's start, when HTTPOptions.BodyTimeout is
	// zero (2 min, as `wasmhooks serve`'s): a body that stops coming is
	// given up and its connection closed. Without it a client (a holder of
	// the token) held a connection and its goroutine for ever by declaring
	// a body and never sending it.
	DefaultHTTPBodyTimeout = 2 * time.Minute
)

// HTTPOptions authenticates HTTPHandler's requests and bounds its sessions.
// The zero value is the defaults: no authentication.
type HTTPOptions struct {
	// Token, when not empty, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN): any other request is answered 401
	// with a problem document (code "unauthenticated") and a
	// WWW-Authenticate: Bearer challenge, before it opens a session or
	// reaches one. Empty means no authentication. CheckHTTPToken says
	// whether a token is long enough; HTTPHandler takes it as given.
	Token string
	// MaxSessions bounds the open sessions: an initialize past it is
	// refused (503) until one closes. Zero means DefaultMaxHTTPSessions.
	MaxSessions int
	// SessionIdle closes a session that sent no request for that long.
	// Zero means DefaultHTTPSessionIdle.
	SessionIdle time.Duration
	// BodyTimeout bounds the time a request's body takes to arrive (see
	// BoundBodies). Zero means DefaultHTTPBodyTimeout.
	BodyTimeout time.Duration
}

// HTTPHandler serves the server over MCP's streamable HTTP transport (the
// SDK's, its request bodies bounded at mcp.DefaultMaxRequestBodyBytes and
// in time at opts.BodyTimeout), to the holders of opts.Token if set, with
// opts' bounds on sessions. A request that starts a session (a POST
// without Mcp-Session-Id) when MaxSessions are open is refused; sessions
// opened by requests in flight together may pass it by their number.
func HTTPHandler(s *mcp.Server, opts HTTPOptions) http.Handler {
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxHTTPSessions
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultHTTPSessionIdle
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{SessionTimeout: opts.SessionIdle})
	return BoundBodies(opts.BodyTimeout, BearerAuth(opts.Token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			n := 0
			for range s.Sessions() {
				n++
			}
			if n >= opts.MaxSessions {
				w.Header().Set("Retry-After", "1")
				http.Error(w, fmt.Sprintf("too many sessions: %d open (the bound)", n), http.StatusServiceUnavailable)
				return
			}
		}
		h.ServeHTTP(w, r)
	})))
}

// BoundBodies is next with each request's body given d from the request's
// start to arrive (zero or less: DefaultHTTPBodyTimeout). A read of the
// body past it fails (the SDK answers 400) and the connection is closed;
// so is one whose unread body had not all arrived by then (net/http reads
// what is left after the answer). Requests without a body (an event
// stream's GET) are not bounded, nor is a handler once it has read its
// body: the bound is the connection's read deadline, lifted at the body's
// end (bodydeadline.Set), set by the handler because the http.Server (and
// its ReadTimeout) is the embedder's. Nested, the innermost bound holds. A
// command that routes several paths wraps its whole mux in it, as in
// BearerAuth.
func BoundBodies(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		d = DefaultHTTPBodyTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodydeadline.Set(w, r, time.Now().Add(d))
		next.ServeHTTP(w, r)
	})
}
