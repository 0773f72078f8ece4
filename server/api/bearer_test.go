package api

import (
	"net/http"
	"testing"
)

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers []string
		token   string // "" when refused
	}{
		{"none", nil, ""},
		{"bearer", []string{"Bearer abc"}, "abc"},
		{"scheme's case ignored", []string{"bEARER abc"}, "abc"},
		{"spaces after the scheme", []string{"Bearer   abc"}, "abc"},
		{"another scheme", []string{"Basic abc"}, ""},
		{"no token", []string{"Bearer "}, ""},
		{"no space", []string{"Bearerabc"}, ""},
		{"scheme alone", []string{"Bearer"}, ""},
		{"two headers, same token", []string{"Bearer abc", "Bearer abc"}, ""},
		{"two headers, the second another scheme", []string{"Bearer abc", "Basic x"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.headers {
				h.Add("Authorization", v)
			}
			token, refused := BearerToken(h)
			if token != tt.token || (token == "") == (refused == "") {
				t.Fatalf("BearerToken(%q) = %q, %q; want %q", tt.headers, token, refused, tt.token)
			}
		})
	}
}
