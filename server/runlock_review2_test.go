package server

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func lockRun(s *Server, tenant, run string) func() { return s.runLock(tenant, run) }

// TestRunLocksPerTenant: a run id held by one tenant (a slow run) holds up
// no other tenant's runs. The locks were 64 stripes, so one tenant with 64
// slow runs held up every other tenant's idempotent runs.
func TestRunLocksPerTenant(t *testing.T) {
	s := &Server{}
	release := make(chan struct{})
	var held, ended sync.WaitGroup
	for i := range 64 {
		held.Add(1)
		ended.Add(1)
		go func() { // acme's slow runs, each in its own request
			defer ended.Done()
			unlock := lockRun(s, "acme", fmt.Sprint("slow", i))
			held.Done()
			<-release
			unlock()
		}()
	}
	heldc := make(chan struct{})
	go func() { held.Wait(); close(heldc) }()
	select {
	case <-heldc:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("acme's own distinct run ids wait for each other")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			lockRun(s, "globex", fmt.Sprint("r", i))()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("globex's runs wait for acme's")
	}
	close(release)
	ended.Wait()
	if n := s.runLocks.Len(); n != 0 {
		t.Errorf("%d locks left after every run ended", n)
	}
}
