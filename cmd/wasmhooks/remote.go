package main

// The verbs over the platform's API (`wasmhooks serve`): what they share.
// Each verb is a thin layer over package server/client; its output is the
// server's JSON answer, pretty-printed on stdout; a refusal is printed as the
// other commands print theirs, {"error": {"code", "message", "status"}},
// with the problem's stable code, and exits 1.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server/api"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// The environment of the API verbs. The API key is never a flag's value
// (argv is visible to every user of the machine, in ps and in shell
// history): it is read from --api-key-file, else from $WASMHOOKS_KEY.
// (WASMHOOKS_KEY_FILE is another key: the host key of the local chain
// commands.)
const (
	envServer = "WASMHOOKS_SERVER"
	envAPIKey = "WASMHOOKS_KEY"
)

// defaultServer is the platform's URL without --server or $WASMHOOKS_SERVER:
// serve's default address.
const defaultServer = "http://127.0.0.1:8080"

// apiRequestTimeout bounds one request of a verb (2 min: a long poll waits
// at most the server's DefaultMaxWait, 60 s).
const apiRequestTimeout = 2 * time.Minute

// maxAPIKeyFileBytes bounds an --api-key-file (a key is 48 bytes) and an
// mcp --token-file (readSecret).
const maxAPIKeyFileBytes = 4 << 10

// apiFlagsHelp is the paragraph every API verb's usage ends with.
const apiFlagsHelp = `
The platform is --server (default $WASMHOOKS_SERVER, else ` + defaultServer + `).
The API key is read from --api-key-file (a file only its owner can read),
else from $WASMHOOKS_KEY; it is never taken on the command line, and never
printed. A refusal prints {"error": {"code", "message", "status"}} with the
server's stable code and exits 1; a usage error exits 2.
`

// apiConn holds the flags that reach the platform.
type apiConn struct {
	server  string
	keyFile string
}

func addAPIFlags(fs *flag.FlagSet) *apiConn {
	c := &apiConn{}
	def := os.Getenv(envServer)
	if def == "" {
		def = defaultServer
	}
	fs.StringVar(&c.server, "server", def, "the platform's URL ($"+envServer+")")
	fs.StringVar(&c.keyFile, "api-key-file", "", "a file holding the API key, readable by its owner only (default: $"+envAPIKey+")")
	return c
}

// usageError marks an error that is the caller's: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// client makes the verb's client, or says why it cannot (a usage error).
func (c *apiConn) client(stderr io.Writer) (*client.Client, error) {
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &usageError{fmt.Sprintf("--server %q: want http://HOST:PORT or https://HOST:PORT", c.server)}
	}
	key, err := c.key()
	if err != nil {
		return nil, err
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		fmt.Fprintf(stderr, "wasmhooks: warning: %s is plain HTTP to another machine: the API key crosses the network in clear\n", u.Host)
	}
	cl := client.New(c.server, key)
	cl.HTTP = &http.Client{Timeout: apiRequestTimeout}
	return cl, nil
}

func (c *apiConn) key() (string, error) {
	k, err := readSecret("--api-key-file", c.keyFile, envAPIKey)
	if err == nil && k == "" {
		err = &usageError{"no API key: give --api-key-file FILE or set $" + envAPIKey}
	}
	return k, err
}

// readSecret reads a secret (an API key, a bearer token) from path, the
// value of flagName: a file that passes checkSecretFile (ours, only we can
// read or write it), of at most maxAPIKeyFileBytes, not empty once trimmed.
// Without path it is $env, trimmed, "" when unset: the file wins over the
// variable. A refusal is a usageError naming the flag.
func readSecret(flagName, path, env string) (string, error) {
	if path == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	if err := checkSecretFile(path); err != nil {
		return "", &usageError{fmt.Sprintf("%s: %v", flagName, err)}
	}
	b, err := runtime.ReadFileLimit(path, maxAPIKeyFileBytes, "api_key_bytes")
	if err != nil {
		return "", &usageError{fmt.Sprintf("%s: %v", flagName, err)}
	}
	if k := strings.TrimSpace(string(b)); k != "" {
		return k, nil
	}
	return "", &usageError{fmt.Sprintf("%s %s is empty", flagName, path)}
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// apiErrorDoc is what a verb prints when the server refuses: the
// problem's stable code, its detail and its HTTP status, and the validation
// report of a refused module.
type apiErrorDoc struct {
	Error apiErrorBody `json:"error"`
	Info  any          `json:"info,omitempty"`
}

type apiErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// apiFail prints err and returns the verb's exit code: 2 for a usage
// error, else 1 (the server refused, or could not be reached).
func apiFail(stdout, stderr io.Writer, synopsis string, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "wasmhooks: %s\n%s", ue.msg, synopsis)
		return exitUsage
	}
	var p *api.Problem
	if errors.As(err, &p) {
		printJSON(stdout, apiErrorDoc{Error: apiErrorBody{Code: p.Code, Message: p.Detail, Status: p.Status}, Info: p.Report})
		return exitRefused
	}
	code := "request_failed"
	var ne net.Error
	switch {
	case errors.Is(err, client.ErrUnrecorded):
		code = "unrecorded" // resolved, but its outcome will never come: not worth retrying
	case errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded):
		code = "unreachable"
	}
	printJSON(stdout, apiErrorDoc{Error: apiErrorBody{Code: code, Message: err.Error()}})
	return exitRefused
}

// parseArgs parses fs's flags anywhere among args (`push FILE --publisher
// P` as well as `push --publisher P FILE`) and returns the other
// arguments; after "--" everything is an argument.
func parseArgs(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer) ([]string, int, bool) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if code, ok := parseFlags(fs, args, synopsis, stdout, stderr); !ok {
			return nil, code, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return append(pos, tail...), exitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// verb is one API verb: its flags are declared on fs, then the verbFunc
// they return is called with the positional arguments and the client.
type verb struct {
	name     string // as in the usage: "push", "admin key create"
	synopsis string
	help     string // what it does, a paragraph
	nargs    int    // the positional arguments it takes (-1: any)
	flags    func(fs *flag.FlagSet) verbFunc
}

// runVerb parses v's flags, checks its arguments, makes the client, runs
// it and prints its answer.
func runVerb(ctx context.Context, v verb, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(v.name, flag.ContinueOnError)
	conn := addAPIFlags(fs)
	do := v.flags(fs)
	usage := "usage:\n" + v.synopsis + "\n" + v.help + apiFlagsHelp
	pos, code, ok := parseArgs(fs, args, usage, stdout, stderr)
	if !ok {
		return code
	}
	if v.nargs >= 0 && len(pos) != v.nargs {
		fmt.Fprintf(stderr, "wasmhooks %s: want %d argument(s), got %d\n%s", v.name, v.nargs, len(pos), usage)
		return exitUsage
	}
	cl, err := conn.client(stderr)
	if err != nil {
		return apiFail(stdout, stderr, usage, err)
	}
	answer, err := do(ctx, cl, pos, stdin)
	if err != nil {
		return apiFail(stdout, stderr, usage, err)
	}
	printAnswer(stdout, answer)
	return exitOK
}

// runGroup dispatches a group of verbs ("admin", "signing-key") on its
// first argument.
func runGroup(ctx context.Context, group string, verbs []verb, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var syn strings.Builder
	for _, v := range verbs {
		syn.WriteString(v.synopsis)
	}
	usage := "usage:\n" + syn.String() + "\nwasmhooks " + group + " VERB --help lists the verb's flags.\n"
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	for _, v := range verbs {
		if strings.TrimPrefix(v.name, group+" ") == args[0] {
			return runVerb(ctx, v, args[1:], stdin, stdout, stderr)
		}
	}
	// Two words: "admin key create".
	if len(args) > 1 {
		for _, v := range verbs {
			if strings.TrimPrefix(v.name, group+" ") == args[0]+" "+args[1] {
				return runVerb(ctx, v, args[2:], stdin, stdout, stderr)
			}
		}
	}
	if len(args) > 1 && slices.Contains([]string{"-h", "-help", "--help", "help"}, args[1]) {
		fmt.Fprint(stdout, usage) // "admin key --help"
		return exitOK
	}
	fmt.Fprintf(stderr, "wasmhooks %s: unknown verb %q\n%s", group, strings.Join(args[:min(2, len(args))], " "), usage)
	return exitUsage
}

// usageErrorf is a usage error for a verb's run function.
func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// apiVerb is the single-word API verb name.
func apiVerb(name string) verb {
	for _, v := range []verb{pushVerb, publishVerb, signVerb, bindVerb, approvalsVerb, resolveVerb, versionsVerb, callVerb} {
		if v.name == name {
			return v
		}
	}
	panic("wasmhooks: no verb " + name) // main's switch names only these
}
