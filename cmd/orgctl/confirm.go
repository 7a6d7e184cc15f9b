package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// errDeclined is a confirmation answered other than yes: nothing was done.
var errDeclined = errors.New("not confirmed: nothing was deleted")

// confirm asks the person at the terminal whether to go on with what the
// question says, as gh and doctl do before a deletion that cannot be
// undone. yes (--yes) answers for them. In a script, with no terminal to
// ask on, the command refuses rather than guess: --yes must say it.
func (a *app) confirm(ctx context.Context, question string, yes bool) error {
	if yes {
		return nil
	}
	in, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return usageErrorf("%s: standard input is not a terminal to ask on; add --yes to confirm", question)
	}
	fmt.Fprintf(a.stderr, "%s This cannot be undone. [y/N] ", question)
	answer := make(chan string, 1)
	go func() {
		// At most a line of 1 KiB; Ctrl-D (no line) is no.
		line, _ := bufio.NewReader(io.LimitReader(in, 1024)).ReadString('\n')
		answer <- line
	}()
	select {
	case <-ctx.Done(): // Ctrl-C at the prompt
		fmt.Fprintln(a.stderr)
		return ctx.Err()
	case line := <-answer:
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return nil
		}
		return errDeclined
	}
}
