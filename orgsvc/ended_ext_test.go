package orgsvc_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
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

// The admin listener lists live environments by the subject that created
// them, as the token the backend verified names it: one subject's, or every
// subject's, page by page; nothing else, and bounded.
func TestTheAdminListenerListsEnvironmentsByTheSubjectThatCreatedThem(t *testing.T) {
	iss := testkit.StartIssuer(t)
	be := testkit.StartBackend(t, testkit.Postgres, iss.URL(), orgsvc.Config{})
	ctx := t.Context()
	created := map[string][]string{} // subject -> environment ids
	for _, who := range []string{"free-creator-a", "free-creator-b", "svc-env-manager"} {
		tok := testkit.Token(t, iss.URL(), who)
		c := testkit.NewClients(be.URL, testkit.ConnectProto, tok)
		var prj string
		if who == "svc-env-manager" {
			// A service account has no organization of its own: it creates
			// in a person's project.
			admin := testkit.NewClients(be.URL, testkit.ConnectProto, testkit.Token(t, iss.URL(), "free-creator-c"))
			org, err := admin.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "by-svc", BillingEmail: "a@b.example"}))
			if err != nil {
				t.Fatal(err)
			}
			p, err := admin.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
			if err != nil {
				t.Fatal(err)
			}
			prj = p.Msg.Id
		} else {
			org, err := c.Org.CreateOrganization(ctx, req(&svcv1.CreateOrganizationRequest{Name: "by-" + who, BillingEmail: "a@b.example"}))
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Org.CreateProject(ctx, req(&svcv1.CreateProjectRequest{OrganizationId: org.Msg.Id, Name: "p"}))
			if err != nil {
				t.Fatal(err)
			}
			prj = p.Msg.Id
		}
		sub := testkit.Subject(t, tok)
		for i := range 3 {
			env, err := c.Env.CreateEnvironment(ctx, req(&svcv1.CreateEnvironmentRequest{Name: fmt.Sprintf("e%d", i), BlueprintId: "redis-7", ProjectId: prj}))
			if err != nil {
				t.Fatal(err)
			}
			created[sub] = append(created[sub], env.Msg.Environment.Id)
		}
		// A deleted one is not listed.
		if _, err := c.Env.DeleteEnvironment(ctx, req(&svcv1.DeleteEnvironmentRequest{EnvironmentId: created[sub][1]})); err != nil {
			t.Fatal(err)
		}
		created[sub] = slices.Delete(created[sub], 1, 2)
	}

	post := func(in backendapi.CreatedRequest) (int, backendapi.CreatedPage) {
		t.Helper()
		body, _ := json.Marshal(in)
		res, err := http.Post(be.AdminURL+backendapi.CreatedEnvironmentsPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out backendapi.CreatedPage
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	list := func(subject string) map[string][]string {
		t.Helper()
		got := map[string][]string{}
		after := ""
		for pages := 0; ; pages++ {
			code, page := post(backendapi.CreatedRequest{Subject: subject, After: after, Limit: 1})
			if code != http.StatusOK || len(page.Environments) > 1 || pages > 20 {
				t.Fatalf("page %d after %q: %d %+v", pages, after, code, page)
			}
			for _, e := range page.Environments {
				if e.CreatedAt.IsZero() {
					t.Fatalf("%s without its creation time", e.ID)
				}
				got[e.Subject] = append(got[e.Subject], e.ID)
			}
			if page.Next == "" {
				return got
			}
			after = page.Next
		}
	}
	for sub, ids := range created {
		if got := list(sub); len(got) != 1 || !slices.Equal(got[sub], ids) {
			t.Errorf("%s's environments: %v, want %v", sub, got, ids)
		}
	}
	if got := list(""); !maps.EqualFunc(got, created, slices.Equal) {
		t.Errorf("every subject's environments: %v, want %v", got, created)
	}

	for _, tt := range []struct {
		body string
		want int
	}{
		{`{"limit": 1001}`, http.StatusBadRequest},
		{`{"limit": -1}`, http.StatusBadRequest},
		{`{"after": "not a token"}`, http.StatusBadRequest},
		{`{"subject":`, http.StatusBadRequest},
		{`{"subject": "` + strings.Repeat("x", backendapi.MaxCreatedRequest) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		res, err := http.Post(be.AdminURL+backendapi.CreatedEnvironmentsPath, "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.want {
			t.Errorf("%.40s: %d, want %d", tt.body, res.StatusCode, tt.want)
		}
	}
	// Not on the API listener.
	r, err := http.Post(be.URL+backendapi.CreatedEnvironmentsPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode == http.StatusOK {
		t.Fatal("the API listener serves the internal listing")
	}
}
