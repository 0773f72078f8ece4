package api

import (
	"fmt"
	"net/http"
	"strings"
)

// BearerToken returns the token of h's one Authorization header, whose
// scheme is Bearer (its case ignored, RFC 9110 section 11.1) followed by one
// or more spaces (section 11.4), or why there is none: the detail of a 401.
// More than one Authorization header is refused whatever they hold: the
// field is a singleton (section 11.6.2), and which of them a proxy in front
// or a handler behind would take is not ours to guess.
func BearerToken(h http.Header) (token, refused string) {
	values := h.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", "a bearer token is required: Authorization: Bearer TOKEN"
	case len(values) > 1:
		return "", fmt.Sprintf("%d Authorization headers: send one, Authorization: Bearer TOKEN", len(values))
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	token = strings.TrimLeft(token, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", "a bearer token is required: Authorization: Bearer TOKEN"
	}
	return token, ""
}
