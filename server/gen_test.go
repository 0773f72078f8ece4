package server

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite openapi.json from the route table")

// TestOpenAPIFile checks that openapi.json is what BuildOpenAPI makes of the
// route table: a route added without regenerating the file fails here.
func TestOpenAPIFile(t *testing.T) {
	var s Server
	want, err := BuildOpenAPI(s.table())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("openapi.json is not the route table's document: run go test -run TestOpenAPIFile ./server -update")
	}
}
