package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	flag "github.com/spf13/pflag"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
)

// statusProvisioning is the status a watch waits to see the environment leave.
const statusProvisioning = "PROVISIONING"

func defineEnvWatch(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "ENV_ID"); err != nil {
			return err
		}
		// A watch lasts as long as the environment provisions: --timeout
		// bounds it only when given.
		if fs.Changed("timeout") && a.g.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, a.g.timeout)
			defer cancel()
		}
		return a.watch(ctx, args[0])
	}
}

// watch prints each update of the environment until its status is other
// than PROVISIONING, the stream ends, or ctx is done. Opening the stream is
// retried like a unary call: a refusal (the concurrent-stream limit) comes
// with the first receive.
func (a *app) watch(ctx context.Context, id string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream, whatever way we leave
	var stream *connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse]
	err := a.policy.retry(ctx, func() error {
		s, err := a.api.envs.WatchEnvironment(ctx, connect.NewRequest(&svcv1.WatchEnvironmentRequest{EnvironmentId: id}))
		if err != nil {
			return err
		}
		if !s.Receive() {
			err := s.Err()
			_ = s.Close()
			if err == nil {
				err = errors.New("the stream ended before the first update")
			}
			return err
		}
		stream = s
		return nil
	})
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		msg := stream.Msg()
		if err := a.printUpdate(msg); err != nil {
			return err
		}
		if msg.GetStatus() != statusProvisioning {
			return nil
		}
		if !stream.Receive() {
			if err := stream.Err(); err != nil {
				return err
			}
			fmt.Fprintln(a.stderr, "orgctl: the API ended the watch")
			return nil
		}
	}
}

// printUpdate writes one update: a line of JSON (one object per line, for
// jq), or a table row with the time it arrived.
func (a *app) printUpdate(msg *svcv1.WatchEnvironmentResponse) error {
	if a.g.output == formatJSON {
		return writeJSON(a.stdout, msg, false)
	}
	env := msg.GetEnvironment()
	_, err := fmt.Fprintf(a.stdout, "%s  %-13s %s %s\n", time.Now().UTC().Format(time.RFC3339), msg.GetStatus(), env.GetId(), env.GetName())
	return err
}
