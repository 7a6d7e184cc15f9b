package edge_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

func TestAFreshEdgeServesEveryoneAfterACallWithA5msDeadline(t *testing.T) {
	t.Parallel()
	iss := testkit.StartSlowIssuer(t, 200*time.Millisecond)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	e := testkit.StartEdge(t, testkit.EdgeConfig(t, be.URL, iss.URL()))

	// The edge's first call, a gRPC call over HTTP/2 whose client gives up
	// after 5 ms (it resets its stream): discovery takes longer.
	c := testkit.NewClients(e.URL, testkit.GRPC, testkit.Token(t, iss.URL(), "alice"))
	// Its connection is open already (a refusal that needs no token), so
	// that the call reaches the edge within its 5 ms.
	if res, err := testkit.H2CClient.Get(e.URL + "/nothing"); err == nil {
		_ = res.Body.Close()
	} else {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctxT(t), 5*time.Millisecond)
	defer cancel()
	if _, err := c.Org.ListOrganizations(short, connect.NewRequest(&svcv1.ListOrganizationsRequest{})); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("the 5 ms call: %v", err)
	}

	for _, who := range []string{"alice", "bob"} {
		if res, body := jsonCall(t, e.URL, testkit.Token(t, iss.URL(), who), listOrgs, "{}"); res.StatusCode != http.StatusOK {
			t.Fatalf("%s, after a 5 ms call: %d %v", who, res.StatusCode, body)
		}
	}
}
