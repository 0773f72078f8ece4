package storetest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
)

// Child is the test binary run again as a child process, for the tests of
// several processes sharing one database.
type Child struct {
	Cmd *exec.Cmd
	// In is the child's stdin.
	In io.WriteCloser
	// Out reads the child's stdout by line.
	Out *bufio.Scanner
}

// StartChild runs the test binary again with -test.run=run and env added to
// its environment; its stderr is this process's. It is killed when t ends.
func StartChild(t testing.TB, run string, env ...string) Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return Child{cmd, in, bufio.NewScanner(out)}
}

// Expect fails t unless the child's next line is want.
func (c Child) Expect(t testing.TB, want string) {
	t.Helper()
	if !c.Out.Scan() || c.Out.Text() != want {
		t.Fatalf("child printed %q (%v), want %q", c.Out.Text(), c.Out.Err(), want)
	}
}

// Finish reads the child's lines to the end and waits for it to exit; it
// fails t unless the child exits with 0.
func (c Child) Finish(t testing.TB) []string {
	t.Helper()
	var lines []string
	for c.Out.Scan() {
		lines = append(lines, c.Out.Text())
	}
	if err := c.Cmd.Wait(); err != nil {
		t.Fatalf("child %d: %v (printed %q)", c.Cmd.Process.Pid, err, lines)
	}
	return lines
}

// Kill kills the child (SIGKILL), as a crash would, and waits for it.
func (c Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Cmd.Wait()
}
