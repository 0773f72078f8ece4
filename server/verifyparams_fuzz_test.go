package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// FuzzVerifyParams: an audit verification's query (?full=, ?checkpoint=)
// never panics; one that does not parse, gives a parameter twice, or whose
// checkpoint is too long or does not verify under the host key is 422,
// changing nothing; what is accepted is what the query says, and a
// checkpoint the platform made, sent as the client sends it, is accepted.
func FuzzVerifyParams(f *testing.F) {
	key := []byte("fuzz verify params host key, 32 bytes or more")
	s := &Server{opts: Options{HostKey: key}}
	good, err := audit.NewCheckpoint(key, 7, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	if err != nil {
		f.Fatal(err)
	}
	b, _ := json.Marshal(good)
	enc := url.Values{"checkpoint": {string(b)}, "full": {"true"}}.Encode()
	for _, seed := range []string{
		"", "full=true", "full=maybe", "full=1&full=0", enc, "checkpoint=" + url.QueryEscape(string(b)),
		enc + "&checkpoint=x", enc + "&x=%zz", "checkpoint=%7Bnot", "checkpoint=", "checkpoint=null",
		"checkpoint=" + url.QueryEscape(string(b)+"                    "),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/v1/tenants/t/audit/verify", nil)
		r.URL.RawQuery = raw
		full, given, p := s.verifyParams(r)
		q, perr := url.ParseQuery(raw)
		if p != nil {
			if p.Status != http.StatusUnprocessableEntity || p.Code != CodeInvalidRequest || full || given != nil {
				t.Fatalf("%q: %+v, %v %v", raw, p, full, given)
			}
			return
		}
		switch {
		case perr != nil || len(q["full"]) > 1 || len(q["checkpoint"]) > 1:
			t.Fatalf("%q accepted: %v, full %v", raw, perr, q)
		case full != parseBool(q.Get("full")):
			t.Fatalf("%q: full %v", raw, full)
		case (given != nil) != q.Has("checkpoint"):
			t.Fatalf("%q: checkpoint %+v", raw, given)
		case given != nil && (len(q.Get("checkpoint")) > MaxVerifyCheckpointBytes || given.Check(key) != nil):
			t.Fatalf("%q: a checkpoint accepted: %+v", raw, given)
		}
		if raw == enc && (!full || given == nil || *given != good) {
			t.Fatalf("the client's query %q: %v %+v", raw, full, given)
		}
	})
}

// parseBool is v as strconv.ParseBool reads it, false when it does not.
func parseBool(v string) bool {
	b, _ := strconv.ParseBool(v)
	return b
}
