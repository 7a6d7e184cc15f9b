package orgsvc_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/internal/backendapi"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
	"github.com/orgedge/edge/orgsvc/store"
)

func TestTheAdminListenerSaysWhichEnvironmentsExistAndNothingElse(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.SQLite, iss.URL(), orgsvc.Config{})
	c := testkit.NewClients(be.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "free-existing"))
	ctx := t.Context()
	org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "existing", BillingEmail: "a@b.example"}))
	if err != nil {
		t.Fatal(err)
	}
	prj, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: "e", BlueprintId: "redis-7", ProjectId: prj.Msg.Id}))
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (*http.Response, map[string][]string) {
		res, err := http.Post(be.AdminURL+backendapi.ExistingEnvironmentsPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string][]string
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res, out
	}
	id := env.Msg.Environment.Id
	res, out := post(fmt.Sprintf(`{"ids":[%q,"env_gone","unread:x"]}`, id))
	if res.StatusCode != http.StatusOK || len(out["existing"]) != 1 || out["existing"][0] != id {
		t.Fatalf("%d %v, want only %s", res.StatusCode, out, id)
	}
	if res, _ := post(`{"ids":`); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a malformed request: %d", res.StatusCode)
	}
	var many bytes.Buffer
	many.WriteString(`{"ids":[`)
	for i := range store.MaxExistingIDs + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"env_%d"`, i)
	}
	many.WriteString("]}")
	if res, _ := post(many.String()); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d ids: %d", store.MaxExistingIDs+1, res.StatusCode)
	}
	// Not on the API listener.
	r, err := http.Post(be.URL+backendapi.ExistingEnvironmentsPath, "application/json", strings.NewReader(`{"ids":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode == http.StatusOK {
		t.Fatal("the API listener serves the internal endpoint")
	}
}
