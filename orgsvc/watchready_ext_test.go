package orgsvc_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/identity"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// A watch whose first message says PROVISIONING gets RUNNING next, even
// when provisioning ends while that first message is being written. The
// backend decided twice, once for the message and once for whether to wait
// for RUNNING: on a busy machine (CI beside a CPU hog, 2026-12-07) the
// ready time fell between the two, the stream said PROVISIONING and then
// nothing until the client's deadline. Here the backend's clock passes the
// ready time inside the first message's write.
func TestWatchSaysRunningAfterProvisioningEndsDuringTheFirstMessage(t *testing.T) {
	var (
		mu     sync.Mutex
		base   = time.Now()
		passed time.Duration
		once   sync.Once
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return base.Add(passed) }
	provisioned := func() { once.Do(func() { mu.Lock(); passed = 2 * time.Second; mu.Unlock() }) }

	iss := testkit.StartIssuer(t)
	v, err := identity.NewVerifier(identity.Config{IssuerURL: iss.URL(), Audience: devissuer.DefaultAudience})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := orgsvc.New(orgsvc.Config{Store: testkit.OpenStore(t, testkit.SQLite), Auth: v, Now: clock,
		ProvisionDelay: time.Second, WatchPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := svc.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/WatchEnvironment") {
			w = &onFirstWrite{ResponseWriter: w, do: provisioned}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	ctx := ctxT(t)
	owner := testkit.NewClients(srv.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "pro-ready-owner"))
	org := res(owner.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "ready", BillingEmail: "b@acme.example"}))).must(t)
	prj := res(owner.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Id, Name: "p"}))).must(t)
	env := res(owner.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "go-api", ProjectId: prj.Id}))).must(t).Environment

	stream, err := owner.Env.WatchEnvironment(ctx, req(&svcv1.WatchEnvironmentRequest{EnvironmentId: env.Id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var seen []string
	for len(seen) < 2 && stream.Receive() {
		seen = append(seen, stream.Msg().Status)
	}
	if len(seen) < 2 || seen[0] != "PROVISIONING" || seen[1] != "RUNNING" {
		t.Fatalf("statuses %v (stream error %v), want PROVISIONING then RUNNING", seen, stream.Err())
	}
}

// onFirstWrite calls do when the body's first bytes are written, before
// they go out.
type onFirstWrite struct {
	http.ResponseWriter
	do func()
}

func (w *onFirstWrite) Write(p []byte) (int, error) {
	w.do()
	return w.ResponseWriter.Write(p)
}

func (w *onFirstWrite) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *onFirstWrite) Unwrap() http.ResponseWriter { return w.ResponseWriter }
