package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestAuthorizationHeader: the API key is the token of one Authorization
// header whose scheme is Bearer, in any case, after one or more spaces
// (RFC 9110); a request with two Authorization headers is 401, whatever
// they hold (only the first was read).
func TestAuthorizationHeader(t *testing.T) {
	p := newPlatform(t)
	for _, tt := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"bearer", []string{"Bearer " + adminKey}, 200},
		{"scheme's case ignored", []string{"bearer " + adminKey}, 200},
		{"two spaces", []string{"Bearer  " + adminKey}, 200},
		{"the key twice", []string{"Bearer " + adminKey, "Bearer " + adminKey}, 401},
		{"the key, then another", []string{"Bearer " + adminKey, "Bearer whk_other"}, 401},
		{"another scheme", []string{"Basic " + adminKey}, 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", p.hs.URL+"/v1/keys", nil)
			for _, v := range tt.headers {
				req.Header.Add("Authorization", v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status == 401 {
				var pr server.Problem
				if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil || pr.Code != server.CodeUnauthenticated {
					t.Fatalf("problem %+v, %v", pr, err)
				}
			}
		})
	}
}
