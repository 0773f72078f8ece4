package main

// The publisher's verbs: push, publish, sign, keygen, signing-key.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server/api"
	"github.com/wasmhooks/wasmhooks/server/client"
)

const publisherSynopsis = `  wasmhooks push --publisher P FILE.wasm
  wasmhooks publish [--publisher P] [--digest HEX | --module FILE.wasm] [PUBLISHER/]NAME@VERSION
  wasmhooks sign --signing-key FILE.pem [--publisher P] [PUBLISHER/]NAME@VERSION
  wasmhooks keygen --out FILE
  wasmhooks signing-key register|list|approve|distrust ...  (signing-key --help)
`

// refRE is a version's reference on the command line:
// [publisher/]name@version.
var refRE = regexp.MustCompile(`^(?:([^/@]+)/)?([^/@]+)@([^/@]+)$`)

// parseRef splits [publisher/]name@version; the publisher is --publisher's
// when the reference has none (and must agree when both are given).
func parseRef(ref, publisher string) (pub, name, version string, err error) {
	m := refRE.FindStringSubmatch(ref)
	if m == nil {
		return "", "", "", usageErrorf("%q is not [PUBLISHER/]NAME@VERSION", ref)
	}
	switch {
	case m[1] == "" && publisher == "":
		return "", "", "", usageErrorf("%q names no publisher: give PUBLISHER/NAME@VERSION or --publisher", ref)
	case m[1] != "" && publisher != "" && m[1] != publisher:
		return "", "", "", usageErrorf("%q is not --publisher %s's", ref, publisher)
	case m[1] != "":
		publisher = m[1]
	}
	return publisher, m[2], m[3], nil
}

// byRef declares --publisher for a verb whose argument is a version's
// reference, and returns run called with the reference's parts (parseRef).
func byRef(fs *flag.FlagSet, run func(ctx context.Context, c *client.Client, publisher, name, version string) (any, error)) verbFunc {
	publisher := fs.String("publisher", "", "the publisher, when the reference names none")
	return func(ctx context.Context, c *client.Client, args []string, _ io.Reader) (any, error) {
		pub, name, version, err := parseRef(args[0], *publisher)
		if err != nil {
			return nil, err
		}
		return run(ctx, c, pub, name, version)
	}
}

var pushVerb = verb{
	name:     "push",
	synopsis: "  wasmhooks push --publisher P FILE.wasm\n",
	help: `Uploads a module as publisher P. The server validates it exactly as Load
does and prints its digest (hex sha256) and validation report; a refused
module is stored nowhere, and its report is printed with the refusal.
`,
	nargs: 1,
	flags: func(fs *flag.FlagSet) verbFunc {
		return required(fs, "publisher", "the publisher (the API key's); required", func(ctx context.Context, c *client.Client, publisher string, args []string, _ io.Reader) (any, error) {
			wasm, err := runtime.ReadModuleFile(args[0], 0)
			if err != nil {
				return nil, usageErrorf("%v", err)
			}
			return c.UploadModule(ctx, publisher, wasm)
		})
	},
}

var publishVerb = verb{
	name:     "publish",
	synopsis: "  wasmhooks publish [--publisher P] [--digest HEX | --module FILE.wasm] [PUBLISHER/]NAME@VERSION\n",
	help: `Publishes NAME@VERSION (a semantic version) for an uploaded module: --digest
names it, or --module pushes FILE.wasm first (an upload of a module the
publisher uploaded before is not an error) and publishes its digest. A
published version never changes; publishing the same digest again is not an
error. Prints the version, with its pin (the reference a chain binds).
`,
	nargs: 1,
	flags: func(fs *flag.FlagSet) verbFunc {
		digest := fs.String("digest", "", "the uploaded module's digest (64 hex digits)")
		module := fs.String("module", "", "push this module first and publish its digest")
		return byRef(fs, func(ctx context.Context, c *client.Client, pub, name, version string) (any, error) {
			if (*digest == "") == (*module == "") {
				return nil, usageErrorf("give one of --digest and --module")
			}
			if *module != "" {
				wasm, err := runtime.ReadModuleFile(*module, 0)
				if err != nil {
					return nil, usageErrorf("%v", err)
				}
				d, err := c.UploadModule(ctx, pub, wasm)
				if err != nil {
					return nil, err
				}
				*digest = d.Digest
			}
			return versionOut(c.Publish(ctx, pub, name, version, *digest))
		})
	},
}

// versionOut is the answer of a verb that prints a version: with the pin a
// chain configuration names it by (err passed on as it is).
func versionOut(v *api.VersionDoc, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return struct {
		*api.VersionDoc
		Pin string `json:"pin"`
	}{v, client.Pin(v)}, nil
}

var signVerb = verb{
	name:     "sign",
	synopsis: "  wasmhooks sign --signing-key FILE.pem [--publisher P] [PUBLISHER/]NAME@VERSION\n",
	help: `Signs a published version with an ed25519 private key (a PKCS #8 PEM file, as
keygen or openssl genpkey -algorithm ed25519 writes it): the signature is
made here, over the version, its module's digest and its manifest's digest;
the private key never leaves this machine. The key must be registered
(signing-key register); its signatures count for a tenant that requires
signatures once an admin approved it. Prints the version.
`,
	nargs: 1,
	flags: func(fs *flag.FlagSet) verbFunc {
		keyPath := fs.String("signing-key", "", "the ed25519 private key, PKCS #8 PEM; required")
		return byRef(fs, func(ctx context.Context, c *client.Client, pub, name, version string) (any, error) {
			if *keyPath == "" {
				return nil, usageErrorf("--signing-key is required")
			}
			priv, err := readPrivateKey(*keyPath)
			if err != nil {
				return nil, usageErrorf("--signing-key: %v", err)
			}
			id := api.SigningKeyID(priv.Public().(ed25519.PublicKey))
			return versionOut(c.Sign(ctx, pub, name, version, id, priv))
		})
	},
}

// maxPEMBytes bounds a key file (an ed25519 key's PEM is about 120 bytes).
const maxPEMBytes = 16 << 10

func readPEM(path string) (*pem.Block, error) {
	data, err := runtime.ReadFileLimit(path, maxPEMBytes, "key_bytes")
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s is not a PEM file", path)
	}
	return b, nil
}

// readPrivateKey reads an ed25519 private key, PKCS #8 PEM, from a secret
// file (checkSecretFile: ours, only we can read or write it).
func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	if err := checkSecretFile(path); err != nil {
		return nil, err
	}
	b, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	return parseKey[ed25519.PrivateKey](path, b, x509.ParsePKCS8PrivateKey)
}

// readPublicKey reads an ed25519 public key from a PEM file: a public key
// (PKIX, as keygen's FILE.pub), or a private key whose public half is taken.
func readPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	if b.Type == "PRIVATE KEY" {
		priv, err := readPrivateKey(path)
		if err != nil {
			return nil, err
		}
		return priv.Public().(ed25519.PublicKey), nil
	}
	return parseKey[ed25519.PublicKey](path, b, x509.ParsePKIXPublicKey)
}

// parseKey parses the key of b (read from path) with parse, and checks it
// is a K: an ed25519 key.
func parseKey[K any](path string, b *pem.Block, parse func(der []byte) (any, error)) (K, error) {
	var none K
	k, err := parse(b.Bytes)
	if err != nil {
		return none, fmt.Errorf("%s: %v", path, err)
	}
	key, ok := k.(K)
	if !ok {
		return none, fmt.Errorf("%s is not an ed25519 key", path)
	}
	return key, nil
}

const keygenSynopsis = "  wasmhooks keygen --out FILE\n"

const keygenUsage = "usage:\n" + keygenSynopsis + `
Makes an ed25519 signing key pair: FILE, the private key (PKCS #8 PEM), and
FILE.pub, the public key (PKIX PEM), both mode 0600; an existing file is
never overwritten. Prints the key id the platform will know the key by.
Register the public key with signing-key register; keep the private key
off the machines that hold the publisher's API key.
`

func cmdKeygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("out", "", "where to write the private key (the public key goes to FILE.pub); required")
	if code, ok := parseFlags(fs, args, keygenUsage, stdout, stderr); !ok {
		return code
	}
	if *out == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks keygen: --out is required\n"+keygenUsage)
		return exitUsage
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	pubPath := *out + ".pub"
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{*out, "PRIVATE KEY", privDER}, {pubPath, "PUBLIC KEY", pubDER}} {
		if err := writeNew(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der})); err != nil {
			if f.path == pubPath {
				_ = os.Remove(*out) // not half a pair
			}
			return fail(stdout, exitRefused, "key_file", "%v", err)
		}
	}
	sum := sha256.Sum256(pub)
	printJSON(stdout, map[string]string{"key_id": api.SigningKeyID(pub), "private_key": *out, "public_key": pubPath,
		"public_key_sha256": hex.EncodeToString(sum[:])})
	return exitOK
}

// writeNew writes data to a new file of mode 0600: an existing one is an
// error, never overwritten.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

func signingKeyVerbs() []verb {
	// byPublisher is a verb's flags: --publisher alone, required.
	byPublisher := func(call func(ctx context.Context, c *client.Client, publisher string, args []string, _ io.Reader) (any, error)) func(*flag.FlagSet) verbFunc {
		return func(fs *flag.FlagSet) verbFunc {
			return required(fs, "publisher", "the publisher; required", call)
		}
	}
	return []verb{{
		name:     "signing-key register",
		synopsis: "  wasmhooks signing-key register --publisher P FILE.pub\n",
		help: `Registers an ed25519 public key (a PEM file: keygen's FILE.pub, or the private
key, of which only the public half is sent) for publisher P. Registered with
the publisher's API key, it is not approved: its signatures count for a
tenant that requires signatures once an admin approves it (signing-key
approve). Registered with an admin key, it is approved at once.
`,
		nargs: 1,
		flags: byPublisher(func(ctx context.Context, c *client.Client, publisher string, args []string, _ io.Reader) (any, error) {
			pub, err := readPublicKey(args[0])
			if err != nil {
				return nil, usageErrorf("%v", err)
			}
			return c.RegisterSigningKey(ctx, publisher, pub)
		}),
	}, {
		name:     "signing-key list",
		synopsis: "  wasmhooks signing-key list --publisher P\n",
		help:     "Lists publisher P's signing keys, and whether an admin approved each.\n",
		nargs:    0,
		flags: byPublisher(func(ctx context.Context, c *client.Client, publisher string, _ []string, _ io.Reader) (any, error) {
			ks, err := c.SigningKeys(ctx, publisher)
			return map[string]any{"signing_keys": ks}, err
		}),
	}, {
		name:     "signing-key approve",
		synopsis: "  wasmhooks signing-key approve --publisher P KEY_ID\n",
		help: `(admin) Approves publisher P's signing key KEY_ID: its signatures count for
tenants that require signatures from the next bind. Check first, by a
channel other than the publisher's API key, that the key id is theirs.
`,
		nargs: 1,
		flags: byPublisher(func(ctx context.Context, c *client.Client, publisher string, args []string, _ io.Reader) (any, error) {
			return c.ApproveSigningKey(ctx, publisher, args[0])
		}),
	}, {
		name:     "signing-key distrust",
		synopsis: "  wasmhooks signing-key distrust --publisher P KEY_ID\n",
		help: `(admin) Withdraws the approval of publisher P's signing key KEY_ID: its
signatures stop counting at the next bind and the next start.
`,
		nargs: 1,
		flags: byPublisher(func(ctx context.Context, c *client.Client, publisher string, args []string, _ io.Reader) (any, error) {
			return c.DistrustSigningKey(ctx, publisher, args[0])
		}),
	}}
}
