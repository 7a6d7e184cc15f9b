package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestRealmFixesServiceAccountIdsAndPlans: a service account's token
// subject is its user's id, which Keycloak would otherwise pick at import.
// With fixed ids, limits.subject_plans and subject_quotas can name the
// accounts before the realm exists; with a plan attribute mapped into the
// token's plan claim, each account gets a plan without them.
func TestRealmFixesServiceAccountIdsAndPlans(t *testing.T) {
	data, err := os.ReadFile("keycloak/realm.json")
	if err != nil {
		t.Fatal(err)
	}
	var realm struct {
		Clients []struct {
			ClientID        string `json:"clientId"`
			ServiceAccounts bool   `json:"serviceAccountsEnabled"`
			ProtocolMappers []struct {
				ProtocolMapper string            `json:"protocolMapper"`
				Config         map[string]string `json:"config"`
			} `json:"protocolMappers"`
		} `json:"clients"`
		Users []struct {
			ID                   string              `json:"id"`
			Username             string              `json:"username"`
			ServiceAccountClient string              `json:"serviceAccountClientId"`
			Attributes           map[string][]string `json:"attributes"`
		} `json:"users"`
	}
	if err := json.Unmarshal(data, &realm); err != nil {
		t.Fatal(err)
	}
	defaults := config.Default()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	accounts := 0
	for _, u := range realm.Users {
		if !uuidRE.MatchString(u.ID) {
			t.Errorf("user %s: id %q, want a fixed UUID", u.Username, u.ID)
		}
		if other, dup := seen[u.ID]; dup {
			t.Errorf("users %s and %s share the id %s", other, u.Username, u.ID)
		}
		seen[u.ID] = u.Username
		if u.ServiceAccountClient == "" {
			continue
		}
		accounts++
		plan := u.Attributes["plan"]
		if len(plan) != 1 {
			t.Errorf("service account %s: plan attribute %q, want one plan", u.Username, plan)
		} else if _, ok := defaults.Limits.Plans[plan[0]]; !ok {
			t.Errorf("service account %s: plan %q is not a shipped plan", u.Username, plan[0])
		}
		if !strings.Contains(string(doc), u.ID) {
			t.Errorf("docs/operations.md does not list %s's id %s", u.Username, u.ID)
		}
		mapped := false
		for _, c := range realm.Clients {
			if c.ClientID != u.ServiceAccountClient {
				continue
			}
			if !c.ServiceAccounts {
				t.Errorf("client %s has no service account", c.ClientID)
			}
			for _, m := range c.ProtocolMappers {
				mapped = mapped || m.ProtocolMapper == "oidc-usermodel-attribute-mapper" &&
					m.Config["user.attribute"] == "plan" && m.Config["claim.name"] == defaults.OIDC.PlanClaim &&
					m.Config["access.token.claim"] == "true"
			}
		}
		if !mapped {
			t.Errorf("client %s does not map the plan attribute into the access token's %q claim", u.ServiceAccountClient, defaults.OIDC.PlanClaim)
		}
	}
	if accounts == 0 {
		t.Fatal("the realm has no service-account users")
	}
}
