package main_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal: the controller side, which a
// terminal emulator holds, and the terminal a command is given.
func openTerminal(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlock
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ptmx.Close(); _ = pts.Close() })
	return ptmx, pts
}

// runOnTerminal runs orgctl with standard input and error on a terminal, as
// a person types it, and answers its prompt (ending with "[y/N] ") with
// answer. Standard output stays a pipe.
func (c *cli) runOnTerminal(answer string, args ...string) (r result, screen string) {
	c.t.Helper()
	controller, terminal := openTerminal(c.t)
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = c.env
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = terminal, &stdout, terminal
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	_ = terminal.Close() // the command holds it now; reads end when it exits

	var mu sync.Mutex
	var seen strings.Builder
	prompted := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		once := sync.Once{}
		for {
			n, err := controller.Read(buf)
			mu.Lock()
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "[y/N] ") {
				once.Do(func() { close(prompted) })
			}
			mu.Unlock()
			if err != nil { // EIO once the command has exited
				return
			}
		}
	}()
	select {
	case <-prompted:
		if _, err := io.WriteString(controller, answer+"\n"); err != nil {
			c.t.Fatal(err)
		}
	case <-done:
	}
	err := cmd.Wait()
	<-done
	r.stdout = stdout.String()
	mu.Lock()
	r.stderr = seen.String()
	mu.Unlock()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("orgctl %q: %v", args, err)
	}
	return r, r.stderr
}

func TestForceDeleteAsksOnATerminalAndTakesYesInScripts(t *testing.T) {
	t.Parallel()
	st := startStack(t, stackOptions{})
	c := newCLI(t, st)
	c.login("alice", "alice")
	org := jq(t, ".id", c.mustRun("orgs", "create", "doomed", "--billing-email", "d@example.com", "-o", "json").stdout)
	project := jq(t, ".id", c.mustRun("projects", "create", "p", "--org", org, "-o", "json").stdout)
	c.mustRun("envs", "create", "e", "--project", project, "--blueprint", "postgres-16")

	// On a terminal: asked; anything but yes deletes nothing.
	r, screen := c.runOnTerminal("n", "projects", "delete", project, "--force")
	if r.code != 1 || !strings.Contains(screen, "Delete project "+project+" with all its environments? This cannot be undone. [y/N] ") ||
		!strings.Contains(screen, "orgctl: not confirmed: nothing was deleted") {
		t.Errorf("answered n: %s\nwant the question, then exit 1", r)
	}
	c.mustRun("projects", "get", project)
	r, _ = c.runOnTerminal("y", "projects", "delete", project, "--force")
	if r.code != 0 || !strings.Contains(r.stdout, "Deleted project "+project) {
		t.Errorf("answered y: %s", r)
	}
	if r := c.run("projects", "get", project); r.code != 5 {
		t.Errorf("after yes: %s\nwant exit 5", r)
	}

	// In a script (standard input not a terminal): refused without --yes.
	p2 := jq(t, ".id", c.mustRun("projects", "create", "p2", "--org", org, "-o", "json").stdout)
	r = c.run("orgs", "delete", org, "--force")
	if r.code != 2 || !strings.Contains(r.stderr, "not a terminal") || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("--force in a script: %s\nwant exit 2 naming --yes", r)
	}
	c.mustRun("projects", "get", p2)
	if r := c.mustRun("orgs", "delete", org, "--force", "-y"); !strings.Contains(r.stdout, "Deleted organization") || r.stderr != "" {
		t.Errorf("--force -y: %s", r)
	}
	if r := c.run("projects", "get", p2); r.code != 5 {
		t.Errorf("after --force -y: %s\nwant exit 5", r)
	}
	// Without --force, nothing to confirm.
	o2 := jq(t, ".id", c.mustRun("orgs", "create", "empty", "--billing-email", "e@example.com", "-o", "json").stdout)
	c.mustRun("orgs", "delete", o2)
}
