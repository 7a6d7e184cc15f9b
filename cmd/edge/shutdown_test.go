package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// TestSigtermEndsOpenStreamsUnavailableAndExitsZero runs the built edge
// with its default 30 s shutdown grace, opens a WatchEnvironment stream
// through it in each streaming protocol (an environment that provisions for
// an hour: the streams cannot end by themselves), and sends it SIGTERM, as
// a rollout does. Each client sees its stream end with unavailable,
// reason EDGE_SHUTTING_DOWN, in its own protocol, well before the grace
// ends (it reconnects to another replica); each stream has its access line;
// and the edge exits 0.
func TestSigtermEndsOpenStreamsUnavailableAndExitsZero(t *testing.T) {
	t.Parallel()
	bin := buildEdge(t)
	iss := testkit.SharedIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{ProvisionDelay: time.Hour})
	cfg := testkit.EdgeConfig(t, be.URL, iss.URL())
	cfg.Listen.Addr, cfg.Admin.Addr = freePort(t), freePort(t)
	const grace = 30 * time.Second
	cfg.Listen.ShutdownGrace = grace
	cfg.Log.Format = "json"
	e := runBuilt(t, bin, cfg, "/readyz")
	cmd, stderr, exited := e.cmd, e.stderr, e.exited

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := "http://" + cfg.Listen.Addr
	const who = "pro-rollout"
	owner := testkit.NewClients(url, testkit.ConnectProto, testkit.Token(t, iss.URL(), who))
	org, err := owner.Org.CreateOrganization(ctx, connect.NewRequest(&svcv1.CreateOrganizationRequest{Name: "rollout", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := owner.Org.CreateProject(ctx, connect.NewRequest(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := owner.Env.CreateEnvironment(ctx, connect.NewRequest(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	type watch struct {
		p      testkit.Protocol
		stream *connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse]
	}
	var watches []watch
	for _, p := range testkit.Protocols {
		if !p.Streams() {
			continue
		}
		c := testkit.NewClients(url, p, testkit.Token(t, iss.URL(), who))
		stream, err := c.Env.WatchEnvironment(ctx, connect.NewRequest(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Msg.Environment.Id}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		if !stream.Receive() {
			t.Fatalf("%s: no first message: %v", p, stream.Err())
		}
		watches = append(watches, watch{p, stream})
	}

	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, w := range watches {
		if w.stream.Receive() {
			t.Fatalf("%s: a message %v while provisioning", w.p, w.stream.Msg())
		}
		ended := time.Since(sent)
		var ce *connect.Error
		if !errors.As(w.stream.Err(), &ce) || ce.Code() != connect.CodeUnavailable {
			t.Fatalf("%s: the stream ended with %v, want unavailable", w.p, w.stream.Err())
		}
		if reason := reasonOf(ce); reason != "EDGE_SHUTTING_DOWN" {
			t.Errorf("%s: reason %q, want EDGE_SHUTTING_DOWN", w.p, reason)
		}
		if ended > grace/3 {
			t.Errorf("%s: the stream ended %v after SIGTERM, with a grace of %v", w.p, ended, grace)
		}
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("the edge exited with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(grace):
		t.Fatalf("the edge did not exit within its grace; stderr:\n%s", stderr.String())
	}

	ended := 0
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var line struct {
			Msg, Procedure, Code string
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "call" && strings.HasSuffix(line.Procedure, "/WatchEnvironment") {
			if line.Code != "unavailable" {
				t.Errorf("access line with code %q, want unavailable: %s", line.Code, sc.Bytes())
			}
			ended++
		}
	}
	if ended != len(watches) {
		t.Errorf("%d WatchEnvironment access lines, want %d; stderr:\n%s", ended, len(watches), stderr.String())
	}
}

// reasonOf is the reason of err's ErrorInfo ("" if none).
func reasonOf(err *connect.Error) string {
	for _, d := range err.Details() {
		if v, _ := d.Value(); v != nil {
			if ei, ok := v.(*errdetails.ErrorInfo); ok {
				return ei.Reason
			}
		}
	}
	return ""
}
