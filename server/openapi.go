package server

import (
	_ "embed"
	"encoding/json"
	"regexp"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at /openapi.json. It is
// the file openapi.json, checked into the repository; TestOpenAPI checks it
// is what BuildOpenAPI makes of the route table (go test -run TestOpenAPI
// ./server -update rewrites it).
//
//go:embed openapi.json
var OpenAPI []byte

var pathParamRE = regexp.MustCompile(`\{([a-z]+)\}`)

// BuildOpenAPI makes the OpenAPI document of routes.
func BuildOpenAPI(routes []Route) ([]byte, error) {
	problemRef := map[string]any{"$ref": "#/components/responses/Problem"}
	paths := map[string]map[string]any{
		"/healthz":      {"get": publicOp("healthz", "Liveness")},
		"/readyz":       {"get": publicOp("readyz", "Readiness: the database answers and the server is not draining")},
		"/openapi.json": {"get": publicOp("openapi", "This document")},
	}
	for _, rt := range routes {
		produces, schema200 := rt.Produces, map[string]any{"type": "object"}
		if produces == "" {
			produces = jsonType
		}
		if produces != jsonType {
			schema200 = map[string]any{"type": "string"}
		}
		op := map[string]any{
			"operationId": rt.ID,
			"summary":     rt.Summary,
			"security":    []any{map[string]any{"apiKey": []any{}}},
			"x-roles":     rt.Roles,
			"x-scope":     rt.Scope,
			"responses": map[string]any{
				"200":     map[string]any{"description": "OK", "content": map[string]any{produces: map[string]any{"schema": schema200}}},
				"default": problemRef,
			},
		}
		var params []any
		for _, m := range pathParamRE.FindAllStringSubmatch(rt.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.Body != "" {
			schema := map[string]any{"type": "object"}
			if rt.Body == wasmType {
				schema = map[string]any{"type": "string", "contentMediaType": wasmType}
			}
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{rt.Body: map[string]any{"schema": schema}}}
		}
		if paths[rt.Path] == nil {
			paths[rt.Path] = map[string]any{}
		}
		paths[rt.Path][lower(rt.Method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "wasmhooks platform",
			"version":     "1",
			"description": "The hook platform over HTTP (wasmhooks serve). Every /v1 route takes an API key (Authorization: Bearer KEY); x-roles lists the key roles a route admits, x-scope whose objects it reaches. Errors are RFC 9457 problem+json with a stable code.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"apiKey": map[string]any{"type": "http", "scheme": "bearer"}},
			"responses": map[string]any{"Problem": map[string]any{
				"description": "An RFC 9457 problem",
				"content": map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{
					"type":     "object",
					"required": []string{"type", "title", "status", "code"},
					"properties": map[string]any{
						"type": map[string]any{"type": "string"}, "title": map[string]any{"type": "string"},
						"status": map[string]any{"type": "integer"}, "detail": map[string]any{"type": "string"},
						"code": map[string]any{"type": "string"}, "report": map[string]any{"type": "object"},
					},
				}}},
			}},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

func publicOp(id, summary string) map[string]any {
	return map[string]any{"operationId": id, "summary": summary, "security": []any{}, "x-scope": ScopePublic,
		"responses": map[string]any{"200": map[string]any{"description": "OK"}}}
}

func lower(m string) string {
	b := []byte(m)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
