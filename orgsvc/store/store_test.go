package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/orgsvc/store"
)

// newDatabase returns the DSN of a new, empty database for one test.
type newDatabase func(t *testing.T) string

func sqliteDatabase(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "orgsvc.db")
}

func TestSQLite(t *testing.T) {
	testStore(t, sqliteDatabase)
}

func TestPostgres(t *testing.T) {
	testenv.PostgresDSN(t) // skip (or fail under CI) before any subtest runs
	testStore(t, func(t *testing.T) string { return testenv.PostgresDatabase(t) })
}

// testStore runs the whole suite against a backend.
func testStore(t *testing.T, newDB newDatabase) {
	tests := []struct {
		name string
		test func(t *testing.T, s store.Store)
	}{
		{"OrganizationIDsArePrefixedAndTimeOrdered", testOrganizationIDs},
		{"OrganizationRoundTrip", testOrganizationRoundTrip},
		{"OrganizationWithoutAdminHasNoMembers", testOrganizationWithoutAdmin},
		{"OrganizationNameTaken", testOrganizationNameTaken},
		{"UpdateOrganizationChangesOnlyGivenFields", testUpdateOrganization},
		{"MissingThingsAreNotFound", testNotFound},
		{"ListOrganizationsOfUserWithRole", testListOrganizations},
		{"PagesEndWithEmptyToken", testPagination},
		{"MalformedPageTokenIsRejected", testMalformedPageToken},
		{"ProjectNamesUniqueWithinOrganization", testProjectNames},
		{"ProjectCountFollowsCreateAndDelete", testProjectCount},
		{"DeleteProjectWithEnvironmentsNeedsForce", testDeleteProject},
		{"DeleteOrganizationWithProjectsNeedsForce", testDeleteOrganization},
		{"InviteLowercasesAndRenews", testInvite},
		{"ListInvitationsSkipsExpired", testListInvitations},
		{"AcceptInvitationsMakesMembers", testAcceptInvitations},
		{"LastAdminCanNeitherLeaveNorBeDemoted", testLastAdmin},
		{"MemberRoleChanges", testMemberRoles},
		{"SuspendedAdminsDoNotCountAsAdmins", testSuspendedAdmins},
		{"SuspendedMembershipListsNothing", testSuspendedMembershipListsNothing},
		{"TouchMemberSetsLastActiveEverywhere", testTouchMember},
		{"EnvironmentLifecycle", testEnvironmentLifecycle},
		{"EnvironmentCountersFollowChanges", testEnvironmentCounters},
		{"ListEnvironmentsFilters", testListEnvironments},
		{"EnvironmentsByCreatorListEachCreatorsLiveEnvironments", testEnvironmentsByCreator},
		{"ConcurrentSameNameOneWins", testConcurrentOrganizationName},
		{"ConcurrentMutualDemotionKeepsAnAdmin", testConcurrentDemotion},
		{"ConcurrentProjectsCountExactly", testConcurrentProjects},
		{"ConcurrentEnvironmentsCountExactly", testConcurrentEnvironments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, open(t, newDB(t)))
		})
	}
	t.Run("ReopenMigratesNothing", func(t *testing.T) {
		t.Parallel()
		testReopen(t, newDB(t))
	})
	t.Run("ConcurrentOpensMigrateOnce", func(t *testing.T) {
		t.Parallel()
		testConcurrentOpen(t, newDB(t))
	})
	t.Run("UpgradeRecountsActiveAdmins", func(t *testing.T) {
		t.Parallel()
		testUpgradeRecountsActiveAdmins(t, newDB(t))
	})
	t.Run("UpgradeLeavesOlderEnvironmentsWithoutCreator", func(t *testing.T) {
		t.Parallel()
		testUpgradeLeavesCreatorUnknown(t, newDB(t))
	})
}

// open opens the store at dsn, closed when the test ends.
func open(t *testing.T, dsn string) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	return s
}

// t0 is the tests' clock: times have microsecond precision, as stored.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 890123000, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func email(user string) string { return user + "@example.com" }

// mustOrg creates an organization; admin, if not empty, is its first admin.
func mustOrg(t *testing.T, s store.Store, name, admin string) store.Organization {
	t.Helper()
	var m *store.Member
	if admin != "" {
		m = &store.Member{UserID: admin, Email: email(admin), Name: strings.ToUpper(admin), JoinedAt: t0}
	}
	o, err := s.CreateOrganization(t.Context(), store.Organization{
		Name: name, DisplayName: "The " + name, BillingEmail: "billing@" + name, Plan: "free", CreatedAt: t0,
	}, m)
	if err != nil {
		t.Fatalf("CreateOrganization(%q): %v", name, err)
	}
	return o
}

// mustJoin makes user a member of org with role, the way users join: invited,
// then accepting.
func mustJoin(t *testing.T, s store.Store, orgID, user, role string) {
	t.Helper()
	if _, err := s.Invite(t.Context(), store.Invitation{
		OrganizationID: orgID, Email: email(user), Role: role, InvitedAt: t0, ExpiresAt: at(60),
	}); err != nil {
		t.Fatalf("Invite(%s): %v", user, err)
	}
	n, err := s.AcceptInvitations(t.Context(), store.Person{UserID: user, Email: email(user), Name: user}, at(1))
	if err != nil || n != 1 {
		t.Fatalf("AcceptInvitations(%s) = %d, %v; want 1, nil", user, n, err)
	}
}

func mustProject(t *testing.T, s store.Store, orgID, name string) store.Project {
	t.Helper()
	p, err := s.CreateProject(t.Context(), store.Project{OrganizationID: orgID, Name: name, Description: "about " + name, CreatedAt: t0})
	if err != nil {
		t.Fatalf("CreateProject(%q): %v", name, err)
	}
	return p
}

func mustEnv(t *testing.T, s store.Store, projectID, name, blueprint string) store.Environment {
	t.Helper()
	e, err := s.CreateEnvironment(t.Context(), store.Environment{ProjectID: projectID, Name: name, BlueprintID: blueprint, CreatedAt: t0})
	if err != nil {
		t.Fatalf("CreateEnvironment(%q): %v", name, err)
	}
	return e
}

// wantOrgCounts checks an organization's counters as stored.
func wantOrgCounts(t *testing.T, s store.Store, orgID string, projects, members int32) {
	t.Helper()
	o, err := s.GetOrganization(t.Context(), orgID)
	if err != nil {
		t.Fatalf("GetOrganization: %v", err)
	}
	if o.ProjectCount != projects || o.MemberCount != members {
		t.Errorf("organization counts: projects %d, members %d; want %d, %d", o.ProjectCount, o.MemberCount, projects, members)
	}
}

// wantProjectCounts checks a project's counters as stored.
func wantProjectCounts(t *testing.T, s store.Store, projectID string, envs, blueprints int32) {
	t.Helper()
	p, err := s.GetProject(t.Context(), projectID)
	if err != nil {
		t.Fatalf("GetProject: %v", err)
	}
	if p.EnvironmentCount != envs || p.BlueprintCount != blueprints {
		t.Errorf("project counts: environments %d, blueprints %d; want %d, %d", p.EnvironmentCount, p.BlueprintCount, envs, blueprints)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func testOrganizationIDs(t *testing.T, s store.Store) {
	var ids []string
	for i := range 5 {
		ids = append(ids, mustOrg(t, s, fmt.Sprintf("org%d", i), "").ID)
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "org_") {
			t.Errorf("id %q lacks the prefix org_", id)
		}
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids not in creation order: %v", ids)
	}
	given, err := s.CreateOrganization(t.Context(), store.Organization{ID: "org_given", Name: "given", CreatedAt: t0}, nil)
	if err != nil || given.ID != "org_given" {
		t.Errorf("CreateOrganization with an ID = %q, %v; want org_given", given.ID, err)
	}
	list, _, err := s.ListOrganizations(t.Context(), "", store.Page{Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, o := range list {
		listed = append(listed, o.ID)
	}
	if !slices.Equal(listed, append(ids, "org_given")) {
		t.Errorf("listed %v, want %v in id order", listed, append(ids, "org_given"))
	}
	p := mustProject(t, s, ids[0], "p")
	e := mustEnv(t, s, p.ID, "e", "bp")
	inv, err := s.Invite(t.Context(), store.Invitation{OrganizationID: ids[0], Email: "x@example.com", Role: store.RoleMember, InvitedAt: t0, ExpiresAt: at(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, prefix string }{{p.ID, "prj_"}, {e.ID, "env_"}, {inv.ID, "inv_"}} {
		if !strings.HasPrefix(c.id, c.prefix) || len(c.id) != len(c.prefix)+36 {
			t.Errorf("id %q is not %s followed by a UUID", c.id, c.prefix)
		}
	}
}

func testOrganizationRoundTrip(t *testing.T, s store.Store) {
	created := mustOrg(t, s, "acme", "alice")
	want := store.Organization{
		ID: created.ID, Name: "acme", DisplayName: "The acme", BillingEmail: "billing@acme", Plan: "free",
		MemberCount: 1, CreatedAt: t0,
	}
	if created != want {
		t.Errorf("CreateOrganization = %+v, want %+v", created, want)
	}
	got, err := s.GetOrganization(t.Context(), created.ID)
	if err != nil || got != want {
		t.Errorf("GetOrganization = %+v, %v; want %+v", got, err, want)
	}
	m, err := s.GetMember(t.Context(), created.ID, "alice")
	wantM := store.Member{
		OrganizationID: created.ID, UserID: "alice", Email: "alice@example.com", Name: "ALICE",
		Role: store.RoleAdmin, Status: store.MemberActive, JoinedAt: t0, LastActiveAt: t0,
	}
	if err != nil || m != wantM {
		t.Errorf("GetMember = %+v, %v; want %+v", m, err, wantM)
	}
}

func testOrganizationWithoutAdmin(t *testing.T, s store.Store) {
	for _, admin := range []*store.Member{nil, {Email: "nobody@example.com"}} {
		o, err := s.CreateOrganization(t.Context(), store.Organization{Name: fmt.Sprintf("svc%v", admin != nil), CreatedAt: t0}, admin)
		if err != nil {
			t.Fatal(err)
		}
		if o.MemberCount != 0 {
			t.Errorf("admin %+v: member_count %d, want 0", admin, o.MemberCount)
		}
		wantOrgCounts(t, s, o.ID, 0, 0)
		members, _, err := s.ListMembers(t.Context(), o.ID, store.Page{Size: 10})
		if err != nil || len(members) != 0 {
			t.Errorf("ListMembers = %v, %v; want none", members, err)
		}
	}
}

func testOrganizationNameTaken(t *testing.T, s store.Store) {
	first := mustOrg(t, s, "acme", "alice")
	_, err := s.CreateOrganization(t.Context(), store.Organization{Name: "acme", CreatedAt: t0}, &store.Member{UserID: "bob"})
	wantErr(t, "same name", err, store.ErrOrganizationNameTaken)
	// A clash of IDs is not a clash of names.
	_, err = s.CreateOrganization(t.Context(), store.Organization{ID: first.ID, Name: "other", CreatedAt: t0}, nil)
	if err == nil || errors.Is(err, store.ErrOrganizationNameTaken) {
		t.Errorf("same ID: error %v, want a plain error", err)
	}
	// Nothing of the failed attempts remains.
	list, _, err := s.ListOrganizations(t.Context(), "bob", store.Page{Size: 10})
	if err != nil || len(list) != 0 {
		t.Errorf("bob's organizations = %v, %v; want none", list, err)
	}
	wantOrgCounts(t, s, first.ID, 0, 1)
}

func testUpdateOrganization(t *testing.T, s store.Store) {
	o := mustOrg(t, s, "acme", "alice")
	name, billing := "ACME Corp", "ap@acme.example"
	tests := []struct {
		name                 string
		displayName, billing *string
		want                 store.Organization
	}{
		{"nothing", nil, nil, o},
		{"display name", &name, nil, func() store.Organization { w := o; w.DisplayName = name; return w }()},
		{"billing e-mail", nil, &billing, func() store.Organization { w := o; w.DisplayName = name; w.BillingEmail = billing; return w }()},
	}
	for _, tt := range tests {
		got, err := s.UpdateOrganization(t.Context(), o.ID, tt.displayName, tt.billing)
		if err != nil || got != tt.want {
			t.Errorf("%s: UpdateOrganization = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	if got, err := s.GetOrganization(t.Context(), o.ID); err != nil || got != tests[len(tests)-1].want {
		t.Errorf("GetOrganization = %+v, %v", got, err)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	o := mustOrg(t, s, "acme", "alice")
	p := mustProject(t, s, o.ID, "web")
	ctx := t.Context()
	name := "x"
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"GetOrganization", func() error { _, err := s.GetOrganization(ctx, "org_missing"); return err }, store.ErrOrganizationNotFound},
		{"UpdateOrganization", func() error { _, err := s.UpdateOrganization(ctx, "org_missing", &name, nil); return err }, store.ErrOrganizationNotFound},
		{"DeleteOrganization", func() error { _, err := s.DeleteOrganization(ctx, "org_missing", true, t0); return err }, store.ErrOrganizationNotFound},
		{"CreateProject", func() error {
			_, err := s.CreateProject(ctx, store.Project{OrganizationID: "org_missing", Name: "p"})
			return err
		}, store.ErrOrganizationNotFound},
		{"ListProjects", func() error { _, _, err := s.ListProjects(ctx, "org_missing", store.Page{Size: 1}); return err }, store.ErrOrganizationNotFound},
		{"GetProject", func() error { _, err := s.GetProject(ctx, "prj_missing"); return err }, store.ErrProjectNotFound},
		{"UpdateProject", func() error { _, err := s.UpdateProject(ctx, "prj_missing", &name, nil); return err }, store.ErrProjectNotFound},
		{"DeleteProject", func() error { _, err := s.DeleteProject(ctx, "prj_missing", true, t0); return err }, store.ErrProjectNotFound},
		{"GetMember of a non-member", func() error { _, err := s.GetMember(ctx, o.ID, "bob"); return err }, store.ErrMemberNotFound},
		{"GetMember in a missing organization", func() error { _, err := s.GetMember(ctx, "org_missing", "alice"); return err }, store.ErrOrganizationNotFound},
		{"ListMembers", func() error { _, _, err := s.ListMembers(ctx, "org_missing", store.Page{Size: 1}); return err }, store.ErrOrganizationNotFound},
		{"ListInvitations", func() error { _, err := s.ListInvitations(ctx, "org_missing", t0, 10); return err }, store.ErrOrganizationNotFound},
		{"Invite", func() error {
			_, err := s.Invite(ctx, store.Invitation{OrganizationID: "org_missing", Email: "a@b.c", Role: store.RoleMember})
			return err
		}, store.ErrOrganizationNotFound},
		{"UpdateMember of a non-member", func() error {
			_, err := s.UpdateMember(ctx, o.ID, "bob", store.MemberUpdate{Role: store.RoleAdmin})
			return err
		}, store.ErrMemberNotFound},
		{"UpdateMember in a missing organization", func() error {
			_, err := s.UpdateMember(ctx, "org_missing", "alice", store.MemberUpdate{Role: store.RoleMember})
			return err
		}, store.ErrOrganizationNotFound},
		{"RemoveMember of a non-member", func() error { return s.RemoveMember(ctx, o.ID, "bob") }, store.ErrMemberNotFound},
		{"RemoveMember in a missing organization", func() error { return s.RemoveMember(ctx, "org_missing", "alice") }, store.ErrOrganizationNotFound},
		{"CreateEnvironment", func() error {
			_, err := s.CreateEnvironment(ctx, store.Environment{ProjectID: "prj_missing", Name: "e"})
			return err
		}, store.ErrProjectNotFound},
		{"GetEnvironment", func() error { _, err := s.GetEnvironment(ctx, "env_missing"); return err }, store.ErrEnvironmentNotFound},
		{"DeleteEnvironment", func() error { _, err := s.DeleteEnvironment(ctx, "env_missing", t0); return err }, store.ErrEnvironmentNotFound},
		{"ListEnvironments of a missing project", func() error {
			_, _, err := s.ListEnvironments(ctx, store.EnvironmentFilter{ProjectID: "prj_missing"}, store.Page{Size: 1})
			return err
		}, store.ErrProjectNotFound},
	}
	for _, tt := range tests {
		wantErr(t, tt.name, tt.call(), tt.want)
	}
	// Existing but empty is not missing.
	if l, _, err := s.ListEnvironments(ctx, store.EnvironmentFilter{ProjectID: p.ID}, store.Page{Size: 1}); err != nil || len(l) != 0 {
		t.Errorf("ListEnvironments of an empty project = %v, %v; want none, nil", l, err)
	}
	if l, err := s.ListInvitations(ctx, o.ID, t0, 10); err != nil || len(l) != 0 {
		t.Errorf("ListInvitations of an organization without any = %v, %v; want none, nil", l, err)
	}
	// Failed calls changed nothing.
	wantOrgCounts(t, s, o.ID, 1, 1)
}

func testListOrganizations(t *testing.T, s store.Store) {
	a := mustOrg(t, s, "a", "alice")
	b := mustOrg(t, s, "b", "bob")
	c := mustOrg(t, s, "c", "alice")
	mustJoin(t, s, b.ID, "alice", store.RoleMember)
	mustOrg(t, s, "d", "")

	type entry struct{ id, role string }
	list := func(user string) []entry {
		t.Helper()
		l, next, err := s.ListOrganizations(t.Context(), user, store.Page{Size: 10})
		if err != nil || next != "" {
			t.Fatalf("ListOrganizations(%q) = %v, %q, %v", user, l, next, err)
		}
		var out []entry
		for _, o := range l {
			out = append(out, entry{o.ID, o.Role})
		}
		return out
	}
	if got, want := list("alice"), []entry{{a.ID, "admin"}, {b.ID, "member"}, {c.ID, "admin"}}; !slices.Equal(got, want) {
		t.Errorf("alice's organizations = %v, want %v", got, want)
	}
	if got, want := list("bob"), []entry{{b.ID, "admin"}}; !slices.Equal(got, want) {
		t.Errorf("bob's organizations = %v, want %v", got, want)
	}
	if got := list("carol"); len(got) != 0 {
		t.Errorf("carol's organizations = %v, want none", got)
	}
	all := list("")
	if len(all) != 4 {
		t.Fatalf("every organization: %v, want 4", all)
	}
	for _, e := range all {
		if e.role != "" {
			t.Errorf("every organization: %v has role %q, want none", e.id, e.role)
		}
	}
	// The summary carries the counters.
	l, _, _ := s.ListOrganizations(t.Context(), "bob", store.Page{Size: 10})
	if len(l) != 1 || l[0].MemberCount != 2 || l[0].Name != "b" {
		t.Errorf("bob's summary = %+v, want b with 2 members", l)
	}
}

// pageThrough lists every page of size and returns the ids and page lengths.
func pageThrough(t *testing.T, size int, list func(store.Page) ([]string, string, error)) ([]string, []int) {
	t.Helper()
	var ids []string
	var lens []int
	token := ""
	for range 100 {
		page, next, err := list(store.Page{Size: size, Token: token})
		if err != nil {
			t.Fatalf("page after %q: %v", token, err)
		}
		ids = append(ids, page...)
		lens = append(lens, len(page))
		if next == "" {
			return ids, lens
		}
		token = next
	}
	t.Fatal("pages never end")
	return nil, nil
}

func testPagination(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "u0")
	var projects, users, envs []string
	users = append(users, "u0")
	for i := range 5 {
		p := mustProject(t, s, o.ID, fmt.Sprintf("p%d", i))
		projects = append(projects, p.ID)
		envs = append(envs, mustEnv(t, s, p.ID, "e", "").ID)
	}
	for i := 1; i < 5; i++ {
		u := fmt.Sprintf("u%d", i)
		mustJoin(t, s, o.ID, u, store.RoleMember)
		users = append(users, u)
	}
	for i := 1; i < 5; i++ {
		mustOrg(t, s, fmt.Sprintf("acme%d", i), "")
	}
	orgs, _, err := s.ListOrganizations(ctx, "", store.Page{Size: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var orgIDs []string
	for _, o := range orgs {
		orgIDs = append(orgIDs, o.ID)
	}

	lists := []struct {
		name string
		want []string
		list func(store.Page) ([]string, string, error)
	}{
		{"organizations", orgIDs, func(p store.Page) ([]string, string, error) {
			l, next, err := s.ListOrganizations(ctx, "", p)
			return ids(l, func(o store.OrganizationSummary) string { return o.ID }), next, err
		}},
		{"projects", projects, func(p store.Page) ([]string, string, error) {
			l, next, err := s.ListProjects(ctx, o.ID, p)
			return ids(l, func(p store.Project) string { return p.ID }), next, err
		}},
		{"members", users, func(p store.Page) ([]string, string, error) {
			l, next, err := s.ListMembers(ctx, o.ID, p)
			return ids(l, func(m store.Member) string { return m.UserID }), next, err
		}},
		{"environments", envs, func(p store.Page) ([]string, string, error) {
			l, next, err := s.ListEnvironments(ctx, store.EnvironmentFilter{}, p)
			return ids(l, func(e store.Environment) string { return e.ID }), next, err
		}},
	}
	sizes := []struct {
		size int
		lens []int
	}{
		{2, []int{2, 2, 1}},
		{5, []int{5}}, // a full last page has no next page
		{1000, []int{5}},
	}
	for _, l := range lists {
		for _, sz := range sizes {
			got, lens := pageThrough(t, sz.size, l.list)
			if !slices.Equal(got, l.want) || !slices.Equal(lens, sz.lens) {
				t.Errorf("%s by %d: %v in pages of %v; want %v in pages of %v", l.name, sz.size, got, lens, l.want, sz.lens)
			}
		}
	}
}

func ids[T any](l []T, id func(T) string) []string {
	var out []string
	for _, v := range l {
		out = append(out, id(v))
	}
	return out
}

func testMalformedPageToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	lists := map[string]func(store.Page) error{
		"organizations": func(p store.Page) error { _, _, err := s.ListOrganizations(ctx, "alice", p); return err },
		"projects":      func(p store.Page) error { _, _, err := s.ListProjects(ctx, o.ID, p); return err },
		"members":       func(p store.Page) error { _, _, err := s.ListMembers(ctx, o.ID, p); return err },
		"environments": func(p store.Page) error {
			_, _, err := s.ListEnvironments(ctx, store.EnvironmentFilter{}, p)
			return err
		},
	}
	for name, list := range lists {
		// Not base64url, then base64url of NUL and of a byte that is not UTF-8.
		for _, token := range []string{"!!!", "a b", "AA==", "AA", "_w"} {
			wantErr(t, fmt.Sprintf("%s with token %q", name, token), list(store.Page{Size: 10, Token: token}), store.ErrInvalidPageToken)
		}
	}
}

func testProjectNames(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := mustOrg(t, s, "a", "alice")
	b := mustOrg(t, s, "b", "alice")
	web := mustProject(t, s, a.ID, "web")
	api := mustProject(t, s, a.ID, "api")
	mustProject(t, s, b.ID, "web") // another organization may use the name

	_, err := s.CreateProject(ctx, store.Project{OrganizationID: a.ID, Name: "web", CreatedAt: t0})
	wantErr(t, "same name", err, store.ErrProjectNameTaken)
	wantOrgCounts(t, s, a.ID, 2, 1) // the failed create counted nothing

	webName := "web"
	_, err = s.UpdateProject(ctx, api.ID, &webName, nil)
	wantErr(t, "rename to a taken name", err, store.ErrProjectNameTaken)

	// Renaming to its own name, or changing only the description, is fine.
	desc := "the front end"
	got, err := s.UpdateProject(ctx, web.ID, &webName, &desc)
	want := web
	want.Description = desc
	if err != nil || got != want {
		t.Errorf("UpdateProject = %+v, %v; want %+v", got, err, want)
	}
	newName := "backend"
	got, err = s.UpdateProject(ctx, api.ID, &newName, nil)
	want = api
	want.Name = newName
	if err != nil || got != want {
		t.Errorf("rename = %+v, %v; want %+v", got, err, want)
	}
	if got, err := s.GetProject(ctx, api.ID); err != nil || got != want {
		t.Errorf("GetProject = %+v, %v; want %+v", got, err, want)
	}
	// The old name is free again.
	mustProject(t, s, a.ID, "api")
}

func testProjectCount(t *testing.T, s store.Store) {
	o := mustOrg(t, s, "acme", "alice")
	var ps []store.Project
	for i := range 3 {
		ps = append(ps, mustProject(t, s, o.ID, fmt.Sprintf("p%d", i)))
		wantOrgCounts(t, s, o.ID, int32(i+1), 1)
	}
	if ps[0].OrganizationID != o.ID || ps[0].CreatedAt != t0 || ps[0].Description != "about p0" {
		t.Errorf("created project %+v", ps[0])
	}
	for i, p := range ps {
		if ended, err := s.DeleteProject(t.Context(), p.ID, false, t0); err != nil || len(ended) != 0 {
			t.Fatalf("DeleteProject of an empty project = %v, %v", ended, err)
		}
		wantOrgCounts(t, s, o.ID, int32(2-i), 1)
		_, err := s.GetProject(t.Context(), p.ID)
		wantErr(t, "deleted project", err, store.ErrProjectNotFound)
	}
}

func testDeleteProject(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	p := mustProject(t, s, o.ID, "web")
	keep := mustProject(t, s, o.ID, "keep")
	e1 := mustEnv(t, s, p.ID, "e1", "bp1")
	e2 := mustEnv(t, s, p.ID, "e2", "bp2")
	other := mustEnv(t, s, keep.ID, "e1", "bp1")

	_, err := s.DeleteProject(ctx, p.ID, false, at(5))
	wantErr(t, "without force", err, store.ErrProjectHasEnvironments)
	wantProjectCounts(t, s, p.ID, 2, 2)
	wantOrgCounts(t, s, o.ID, 2, 1)

	ended, err := s.DeleteProject(ctx, p.ID, true, at(5))
	if err != nil {
		t.Fatal(err)
	}
	var want []store.Environment
	for _, e := range []store.Environment{e1, e2} {
		e.Status = store.EnvironmentDeleted
		e.DeletedAt = at(5)
		want = append(want, e)
	}
	if !slices.Equal(ended, want) {
		t.Errorf("ended %+v, want %+v", ended, want)
	}
	for _, e := range want {
		_, err := s.GetEnvironment(ctx, e.ID)
		wantErr(t, "environment of a deleted project", err, store.ErrEnvironmentNotFound)
	}
	_, err = s.GetProject(ctx, p.ID)
	wantErr(t, "deleted project", err, store.ErrProjectNotFound)
	wantOrgCounts(t, s, o.ID, 1, 1)
	// The other project is untouched.
	if got, err := s.GetEnvironment(ctx, other.ID); err != nil || got != other {
		t.Errorf("other environment = %+v, %v", got, err)
	}
	wantProjectCounts(t, s, keep.ID, 1, 1)
	// A project of the same name starts afresh.
	again := mustProject(t, s, o.ID, "web")
	wantProjectCounts(t, s, again.ID, 0, 0)
	mustEnv(t, s, again.ID, "e1", "bp1")
	wantProjectCounts(t, s, again.ID, 1, 1)
}

func testDeleteOrganization(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	mustJoin(t, s, o.ID, "bob", store.RoleMember)
	if _, err := s.Invite(ctx, store.Invitation{OrganizationID: o.ID, Email: "carol@example.com", Role: store.RoleMember, InvitedAt: t0, ExpiresAt: at(60)}); err != nil {
		t.Fatal(err)
	}
	p1 := mustProject(t, s, o.ID, "p1")
	p2 := mustProject(t, s, o.ID, "p2")
	e1 := mustEnv(t, s, p1.ID, "e", "bp")
	e2 := mustEnv(t, s, p2.ID, "e", "bp")
	other := mustOrg(t, s, "other", "bob")
	otherEnv := mustEnv(t, s, mustProject(t, s, other.ID, "p1").ID, "e", "bp")

	_, err := s.DeleteOrganization(ctx, o.ID, false, at(9))
	wantErr(t, "without force", err, store.ErrOrganizationHasProjects)
	wantOrgCounts(t, s, o.ID, 2, 2)

	ended, err := s.DeleteOrganization(ctx, o.ID, true, at(9))
	if err != nil {
		t.Fatal(err)
	}
	if len(ended) != 2 || ended[0].ID != e1.ID || ended[1].ID != e2.ID {
		t.Fatalf("ended %+v, want %s and %s", ended, e1.ID, e2.ID)
	}
	for _, e := range ended {
		if e.Status != store.EnvironmentDeleted || !e.DeletedAt.Equal(at(9)) || e.OrganizationID != o.ID {
			t.Errorf("ended environment %+v, want DELETED at %v", e, at(9))
		}
	}
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"organization", func() error { _, err := s.GetOrganization(ctx, o.ID); return err }(), store.ErrOrganizationNotFound},
		{"project", func() error { _, err := s.GetProject(ctx, p1.ID); return err }(), store.ErrProjectNotFound},
		{"environment", func() error { _, err := s.GetEnvironment(ctx, e2.ID); return err }(), store.ErrEnvironmentNotFound},
		{"member", func() error { _, err := s.GetMember(ctx, o.ID, "bob"); return err }(), store.ErrOrganizationNotFound},
	}
	for _, c := range checks {
		wantErr(t, "deleted "+c.name, c.err, c.want)
	}
	// Bob keeps his other organization; carol's invitation went with the organization.
	l, _, err := s.ListOrganizations(ctx, "bob", store.Page{Size: 10})
	if err != nil || len(l) != 1 || l[0].ID != other.ID {
		t.Errorf("bob's organizations = %+v, %v; want only %s", l, err, other.ID)
	}
	if n, err := s.AcceptInvitations(ctx, store.Person{UserID: "carol", Email: "carol@example.com"}, at(10)); err != nil || n != 0 {
		t.Errorf("AcceptInvitations after delete = %d, %v; want 0", n, err)
	}
	if got, err := s.GetEnvironment(ctx, otherEnv.ID); err != nil || got != otherEnv {
		t.Errorf("other organization's environment = %+v, %v", got, err)
	}
	// The name is free, and an organization without projects needs no force:
	// its members and invitations go with it.
	again := mustOrg(t, s, "acme", "alice")
	mustJoin(t, s, again.ID, "bob", store.RoleMember)
	if _, err := s.Invite(ctx, store.Invitation{OrganizationID: again.ID, Email: "dan@example.com", Role: store.RoleMember, InvitedAt: t0, ExpiresAt: at(60)}); err != nil {
		t.Fatal(err)
	}
	if ended, err := s.DeleteOrganization(ctx, again.ID, false, at(11)); err != nil || len(ended) != 0 {
		t.Errorf("DeleteOrganization without projects = %v, %v", ended, err)
	}
	if l, _, err := s.ListOrganizations(ctx, "alice", store.Page{Size: 10}); err != nil || len(l) != 0 {
		t.Errorf("alice's organizations = %+v, %v; want none", l, err)
	}
	if n, err := s.AcceptInvitations(ctx, store.Person{UserID: "dan", Email: "dan@example.com"}, at(12)); err != nil || n != 0 {
		t.Errorf("AcceptInvitations after delete = %d, %v; want 0", n, err)
	}
}

func testInvite(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	inv, err := s.Invite(ctx, store.Invitation{OrganizationID: o.ID, Email: "Bob@Example.COM", Role: store.RoleMember, InvitedAt: t0, ExpiresAt: at(60)})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Invitation{ID: inv.ID, OrganizationID: o.ID, Email: "bob@example.com", Role: store.RoleMember,
		Status: store.InvitationPending, InvitedAt: t0, ExpiresAt: at(60)}
	if inv != want {
		t.Errorf("Invite = %+v, want %+v", inv, want)
	}
	// Inviting the same address again renews the invitation in place.
	renewed, err := s.Invite(ctx, store.Invitation{OrganizationID: o.ID, Email: "BOB@example.com", Role: store.RoleAdmin, InvitedAt: at(30), ExpiresAt: at(90)})
	want.Role, want.InvitedAt, want.ExpiresAt = store.RoleAdmin, at(30), at(90)
	if err != nil || renewed != want {
		t.Errorf("renewed = %+v, %v; want %+v", renewed, err, want)
	}
	if l, err := s.ListInvitations(ctx, o.ID, at(31), 10); err != nil || !slices.Equal(l, []store.Invitation{want}) {
		t.Errorf("ListInvitations = %+v, %v; want only %+v", l, err, want)
	}
	// A member's address, in any case, cannot be invited.
	for _, addr := range []string{"alice@example.com", "ALICE@example.com"} {
		_, err = s.Invite(ctx, store.Invitation{OrganizationID: o.ID, Email: addr, Role: store.RoleMember, InvitedAt: t0, ExpiresAt: at(60)})
		wantErr(t, "inviting member "+addr, err, store.ErrAlreadyMember)
	}
	// The same address may be invited to another organization.
	other := mustOrg(t, s, "other", "carol")
	if inv2, err := s.Invite(ctx, store.Invitation{OrganizationID: other.ID, Email: "bob@example.com", Role: store.RoleMember, InvitedAt: t0, ExpiresAt: at(60)}); err != nil || inv2.ID == inv.ID {
		t.Errorf("Invite to another organization = %+v, %v; want a new invitation", inv2, err)
	}
	_, err = s.Invite(ctx, store.Invitation{OrganizationID: o.ID, Email: "dan@example.com", Role: "owner", InvitedAt: t0, ExpiresAt: at(60)})
	if err == nil {
		t.Error("Invite with an unknown role succeeded")
	}
	wantOrgCounts(t, s, o.ID, 0, 1) // invitations are not members
}

func testListInvitations(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	invite := func(user string, invited, expires time.Time) store.Invitation {
		inv, err := s.Invite(ctx, store.Invitation{OrganizationID: o.ID, Email: email(user), Role: store.RoleMember, InvitedAt: invited, ExpiresAt: expires})
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	late := invite("late", at(20), at(100))
	early := invite("early", at(10), at(100))
	short := invite("short", at(15), at(30))
	tests := []struct {
		now   time.Time
		limit int
		want  []store.Invitation
	}{
		{at(20), 10, []store.Invitation{early, short, late}},
		{at(20), 2, []store.Invitation{early, short}},
		{at(30), 10, []store.Invitation{early, late}}, // expired at 30
		{at(100), 10, nil},
	}
	for _, tt := range tests {
		got, err := s.ListInvitations(ctx, o.ID, tt.now, tt.limit)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ListInvitations(%v, %d) = %+v, %v; want %+v", tt.now, tt.limit, got, err, tt.want)
		}
	}
}

func testAcceptInvitations(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := mustOrg(t, s, "a", "alice")
	b := mustOrg(t, s, "b", "bob")
	c := mustOrg(t, s, "c", "carol")
	d := mustOrg(t, s, "d", "dan")
	mustJoin(t, s, d.ID, "erin", store.RoleMember)
	invite := func(orgID, addr, role string, expires time.Time) {
		t.Helper()
		if _, err := s.Invite(ctx, store.Invitation{OrganizationID: orgID, Email: addr, Role: role, InvitedAt: t0, ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	invite(a.ID, "Erin@Example.com", store.RoleAdmin, at(60))
	invite(b.ID, "erin@example.com", store.RoleMember, at(60))
	invite(c.ID, "erin@example.com", store.RoleMember, at(10)) // expires before she comes
	// Erin is already a member of d under another address: her invitation
	// there is used up without a second membership.
	invite(d.ID, "erin.d@example.com", store.RoleAdmin, at(60))

	if n, err := s.AcceptInvitations(ctx, store.Person{UserID: "erin"}, at(20)); err != nil || n != 0 {
		t.Errorf("AcceptInvitations without e-mail = %d, %v; want 0", n, err)
	}
	n, err := s.AcceptInvitations(ctx, store.Person{UserID: "erin", Email: "ERIN@example.com", Name: "Erin"}, at(20))
	if err != nil || n != 2 {
		t.Fatalf("AcceptInvitations = %d, %v; want 2", n, err)
	}
	for _, c := range []struct {
		org  store.Organization
		role string
	}{{a, store.RoleAdmin}, {b, store.RoleMember}} {
		m, err := s.GetMember(ctx, c.org.ID, "erin")
		want := store.Member{OrganizationID: c.org.ID, UserID: "erin", Email: "ERIN@example.com", Name: "Erin",
			Role: c.role, Status: store.MemberActive, JoinedAt: at(20), LastActiveAt: at(20)}
		if err != nil || m != want {
			t.Errorf("membership of %s = %+v, %v; want %+v", c.org.Name, m, err, want)
		}
		wantOrgCounts(t, s, c.org.ID, 0, 2)
		if l, err := s.ListInvitations(ctx, c.org.ID, t0, 10); err != nil || len(l) != 0 {
			t.Errorf("%s's invitations after accepting = %+v, %v; want none", c.org.Name, l, err)
		}
	}
	// The expired invitation is left alone and made nothing.
	_, err = s.GetMember(ctx, c.ID, "erin")
	wantErr(t, "expired invitation", err, store.ErrMemberNotFound)
	if l, err := s.ListInvitations(ctx, c.ID, t0, 10); err != nil || len(l) != 1 {
		t.Errorf("expired invitation: %+v, %v; want it kept", l, err)
	}
	wantOrgCounts(t, s, c.ID, 0, 1)
	// Accepting as a member deleted d's invitation without another membership.
	n, err = s.AcceptInvitations(ctx, store.Person{UserID: "erin", Email: "erin.d@example.com"}, at(21))
	if err != nil || n != 0 {
		t.Errorf("AcceptInvitations as a member = %d, %v; want 0", n, err)
	}
	if l, err := s.ListInvitations(ctx, d.ID, t0, 10); err != nil || len(l) != 0 {
		t.Errorf("d's invitations = %+v, %v; want none", l, err)
	}
	if m, err := s.GetMember(ctx, d.ID, "erin"); err != nil || m.Role != store.RoleMember {
		t.Errorf("erin in d = %+v, %v; want her old membership", m, err)
	}
	wantOrgCounts(t, s, d.ID, 0, 2)
	// Erin joined a as an admin, so admin_count counted her: alice may now leave.
	if err := s.RemoveMember(ctx, a.ID, "alice"); err != nil {
		t.Errorf("removing alice after erin joined as admin: %v", err)
	}
	err = s.RemoveMember(ctx, a.ID, "erin")
	wantErr(t, "removing erin, the last admin", err, store.ErrLastAdmin)
	// Nothing is left to accept.
	if n, err := s.AcceptInvitations(ctx, store.Person{UserID: "erin", Email: "erin@example.com"}, at(22)); err != nil || n != 0 {
		t.Errorf("second AcceptInvitations = %d, %v; want 0", n, err)
	}
}

func testLastAdmin(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	mustJoin(t, s, o.ID, "bob", store.RoleMember)

	_, err := s.UpdateMember(ctx, o.ID, "alice", store.MemberUpdate{Role: store.RoleMember})
	wantErr(t, "demoting the last admin", err, store.ErrLastAdmin)
	err = s.RemoveMember(ctx, o.ID, "alice")
	wantErr(t, "removing the last admin", err, store.ErrLastAdmin)
	if m, err := s.GetMember(ctx, o.ID, "alice"); err != nil || m.Role != store.RoleAdmin {
		t.Errorf("alice = %+v, %v; want still admin", m, err)
	}
	wantOrgCounts(t, s, o.ID, 0, 2)

	// With a second admin, the first may go; then the second is the last.
	if _, err := s.UpdateMember(ctx, o.ID, "bob", store.MemberUpdate{Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateMember(ctx, o.ID, "alice", store.MemberUpdate{Role: store.RoleMember}); err != nil {
		t.Errorf("demoting one of two admins: %v", err)
	}
	_, err = s.UpdateMember(ctx, o.ID, "bob", store.MemberUpdate{Role: store.RoleMember})
	wantErr(t, "demoting bob, now the last admin", err, store.ErrLastAdmin)
	if err := s.RemoveMember(ctx, o.ID, "alice"); err != nil {
		t.Errorf("removing a plain member: %v", err)
	}
	wantOrgCounts(t, s, o.ID, 0, 1)
	err = s.RemoveMember(ctx, o.ID, "bob")
	wantErr(t, "removing bob, the last admin", err, store.ErrLastAdmin)

	// An organization a service account created has no admin to protect.
	svc := mustOrg(t, s, "svc", "")
	mustJoin(t, s, svc.ID, "carol", store.RoleMember)
	mustJoin(t, s, svc.ID, "dan", store.RoleMember)
	if err := s.RemoveMember(ctx, svc.ID, "dan"); err != nil {
		t.Errorf("removing a member of an organization without admin: %v", err)
	}
	if _, err := s.UpdateMember(ctx, svc.ID, "carol", store.MemberUpdate{Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateMember(ctx, svc.ID, "carol", store.MemberUpdate{Role: store.RoleMember})
	wantErr(t, "demoting carol, the only admin", err, store.ErrLastAdmin)
	wantOrgCounts(t, s, svc.ID, 0, 1)
}

func testMemberRoles(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	mustJoin(t, s, o.ID, "bob", store.RoleMember)
	before, err := s.GetMember(ctx, o.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		user, role string
		want       error
	}{
		{"alice", store.RoleAdmin, nil}, // the same role: nothing to do, even for the last admin
		{"bob", store.RoleMember, nil},
		{"bob", store.RoleAdmin, nil},
		{"bob", store.RoleAdmin, nil},
		{"alice", store.RoleMember, nil},
		{"bob", store.RoleMember, store.ErrLastAdmin},
		{"alice", store.RoleAdmin, nil},
		{"bob", store.RoleMember, nil},
		{"alice", store.RoleMember, store.ErrLastAdmin},
	}
	for i, st := range steps {
		m, err := s.UpdateMember(ctx, o.ID, st.user, store.MemberUpdate{Role: st.role})
		if !errors.Is(err, st.want) {
			t.Fatalf("step %d: UpdateMember(%s, %s): %v, want %v", i, st.user, st.role, err, st.want)
		}
		if err == nil && (m.Role != st.role || m.UserID != st.user) {
			t.Errorf("step %d: member %+v, want %s as %s", i, m, st.user, st.role)
		}
	}
	after, err := s.GetMember(ctx, o.ID, "bob")
	if err != nil || after != before {
		t.Errorf("bob = %+v, %v; want %+v", after, err, before)
	}
	_, err = s.UpdateMember(ctx, o.ID, "bob", store.MemberUpdate{Role: "owner"})
	if err == nil {
		t.Error("UpdateMember to an unknown role succeeded")
	}
	wantOrgCounts(t, s, o.ID, 0, 2)
}

func testSuspendedAdmins(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	mustJoin(t, s, o.ID, "bob", store.RoleAdmin)
	mustJoin(t, s, o.ID, "carol", store.RoleMember)
	suspend := store.MemberUpdate{Status: store.MemberSuspended}

	m, err := s.UpdateMember(ctx, o.ID, "bob", suspend)
	if err != nil || m.Status != store.MemberSuspended || m.Role != store.RoleAdmin {
		t.Fatalf("suspending bob, one of two admins: %+v, %v", m, err)
	}
	if got, err := s.GetMember(ctx, o.ID, "bob"); err != nil || got.Status != store.MemberSuspended {
		t.Fatalf("bob as stored: %+v, %v", got, err)
	}
	// alice is the last active admin: the suspended bob does not count.
	_, err = s.UpdateMember(ctx, o.ID, "alice", suspend)
	wantErr(t, "suspending alice, the last active admin", err, store.ErrLastAdmin)
	_, err = s.UpdateMember(ctx, o.ID, "alice", store.MemberUpdate{Role: store.RoleMember})
	wantErr(t, "demoting alice, the last active admin", err, store.ErrLastAdmin)
	err = s.RemoveMember(ctx, o.ID, "alice")
	wantErr(t, "removing alice, the last active admin", err, store.ErrLastAdmin)
	if m, err := s.GetMember(ctx, o.ID, "alice"); err != nil || m.Role != store.RoleAdmin || m.Status != store.MemberActive {
		t.Errorf("alice = %+v, %v; want still an active admin", m, err)
	}
	// Changing a suspended admin touches no active admin.
	if _, err := s.UpdateMember(ctx, o.ID, "bob", store.MemberUpdate{Role: store.RoleMember}); err != nil {
		t.Errorf("demoting the suspended bob: %v", err)
	}
	if _, err := s.UpdateMember(ctx, o.ID, "bob", store.MemberUpdate{Role: store.RoleAdmin}); err != nil {
		t.Errorf("promoting the suspended bob: %v", err)
	}
	// A suspended member made admin and active at once is a second admin.
	if _, err := s.UpdateMember(ctx, o.ID, "carol", suspend); err != nil {
		t.Fatal(err)
	}
	if m, err := s.UpdateMember(ctx, o.ID, "carol", store.MemberUpdate{Role: store.RoleAdmin, Status: store.MemberActive}); err != nil ||
		m.Role != store.RoleAdmin || m.Status != store.MemberActive {
		t.Fatalf("reinstating carol as admin: %+v, %v", m, err)
	}
	if _, err := s.UpdateMember(ctx, o.ID, "alice", suspend); err != nil {
		t.Errorf("suspending alice beside the active admin carol: %v", err)
	}
	_, err = s.UpdateMember(ctx, o.ID, "carol", suspend)
	wantErr(t, "suspending carol, now the last active admin", err, store.ErrLastAdmin)
	// Suspended admins may be removed; the last active one still may not.
	if err := s.RemoveMember(ctx, o.ID, "bob"); err != nil {
		t.Errorf("removing the suspended admin bob: %v", err)
	}
	err = s.RemoveMember(ctx, o.ID, "carol")
	wantErr(t, "removing carol, the last active admin", err, store.ErrLastAdmin)
	wantOrgCounts(t, s, o.ID, 0, 2)

	_, err = s.UpdateMember(ctx, o.ID, "alice", store.MemberUpdate{Status: "banned"})
	if err == nil {
		t.Error("UpdateMember to an unknown status succeeded")
	}
}

func testSuspendedMembershipListsNothing(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := mustOrg(t, s, "a", "alice")
	b := mustOrg(t, s, "b", "alice")
	mustJoin(t, s, a.ID, "bob", store.RoleMember)
	mustJoin(t, s, b.ID, "bob", store.RoleMember)
	pa := mustProject(t, s, a.ID, "pa")
	pb := mustProject(t, s, b.ID, "pb")
	ea := mustEnv(t, s, pa.ID, "ea", "go-api")
	eb := mustEnv(t, s, pb.ID, "eb", "go-api")
	if _, err := s.UpdateMember(ctx, a.ID, "bob", store.MemberUpdate{Status: store.MemberSuspended}); err != nil {
		t.Fatal(err)
	}

	orgs, _, err := s.ListOrganizations(ctx, "bob", store.Page{Size: 10})
	if err != nil || len(orgs) != 1 || orgs[0].ID != b.ID {
		t.Errorf("bob's organizations = %+v, %v; want only %s (suspended in %s)", orgs, err, b.ID, a.ID)
	}
	envs, _, err := s.ListEnvironments(ctx, store.EnvironmentFilter{MemberOf: "bob"}, store.Page{Size: 10})
	if err != nil || len(envs) != 1 || envs[0].ID != eb.ID {
		t.Errorf("bob's environments = %+v, %v; want only %s (not %s)", envs, err, eb.ID, ea.ID)
	}
	if err := s.TouchMember(ctx, "bob", at(30)); err != nil {
		t.Fatal(err)
	}
	if m, err := s.GetMember(ctx, a.ID, "bob"); err != nil || m.LastActiveAt.Equal(at(30)) {
		t.Errorf("suspended membership = %+v, %v; want last activity untouched", m, err)
	}
	if m, err := s.GetMember(ctx, b.ID, "bob"); err != nil || !m.LastActiveAt.Equal(at(30)) {
		t.Errorf("active membership = %+v, %v; want last activity at %v", m, err, at(30))
	}
	// Reinstated, bob sees both again.
	if _, err := s.UpdateMember(ctx, a.ID, "bob", store.MemberUpdate{Status: store.MemberActive}); err != nil {
		t.Fatal(err)
	}
	if orgs, _, err := s.ListOrganizations(ctx, "bob", store.Page{Size: 10}); err != nil || len(orgs) != 2 {
		t.Errorf("bob's organizations after reinstatement = %+v, %v; want 2", orgs, err)
	}
}

func testTouchMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := mustOrg(t, s, "a", "alice")
	b := mustOrg(t, s, "b", "bob")
	mustJoin(t, s, b.ID, "alice", store.RoleMember)
	if err := s.TouchMember(ctx, "alice", at(42)); err != nil {
		t.Fatal(err)
	}
	for _, o := range []store.Organization{a, b} {
		if m, err := s.GetMember(ctx, o.ID, "alice"); err != nil || !m.LastActiveAt.Equal(at(42)) {
			t.Errorf("alice in %s: %+v, %v; want last active at %v", o.Name, m, err, at(42))
		}
	}
	if m, err := s.GetMember(ctx, b.ID, "bob"); err != nil || !m.LastActiveAt.Equal(t0) {
		t.Errorf("bob: %+v, %v; want untouched", m, err)
	}
	if err := s.TouchMember(ctx, "nobody", at(43)); err != nil {
		t.Errorf("TouchMember of a non-member: %v", err)
	}
}

func testEnvironmentLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "acme", "alice")
	p := mustProject(t, s, o.ID, "web")
	q := mustProject(t, s, o.ID, "api")
	e, err := s.CreateEnvironment(ctx, store.Environment{ProjectID: p.ID, Name: "dev", BlueprintID: "bp", Status: "RUNNING", CreatedAt: t0, ReadyAt: at(2)})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Environment{ID: e.ID, ProjectID: p.ID, OrganizationID: o.ID, Name: "dev", BlueprintID: "bp",
		Status: store.EnvironmentProvisioning, CreatedAt: t0, ReadyAt: at(2)}
	if e != want {
		t.Errorf("CreateEnvironment = %+v, want %+v", e, want)
	}
	if got, err := s.GetEnvironment(ctx, e.ID); err != nil || got != want {
		t.Errorf("GetEnvironment = %+v, %v; want %+v", got, err, want)
	}
	_, err = s.CreateEnvironment(ctx, store.Environment{ProjectID: p.ID, Name: "dev", BlueprintID: "other", CreatedAt: t0})
	wantErr(t, "same name in the project", err, store.ErrEnvironmentNameTaken)
	wantProjectCounts(t, s, p.ID, 1, 1)
	mustEnv(t, s, q.ID, "dev", "bp") // another project may use the name

	ended, err := s.DeleteEnvironment(ctx, e.ID, at(7))
	want.Status, want.DeletedAt = store.EnvironmentDeleted, at(7)
	if err != nil || ended != want {
		t.Errorf("DeleteEnvironment = %+v, %v; want %+v", ended, err, want)
	}
	_, err = s.GetEnvironment(ctx, e.ID)
	wantErr(t, "deleted environment", err, store.ErrEnvironmentNotFound)
	_, err = s.DeleteEnvironment(ctx, e.ID, at(8))
	wantErr(t, "deleting twice", err, store.ErrEnvironmentNotFound)
	wantProjectCounts(t, s, p.ID, 0, 0)
	// A deleted environment's name is free.
	mustEnv(t, s, p.ID, "dev", "bp")
	wantProjectCounts(t, s, p.ID, 1, 1)
}

func testEnvironmentCounters(t *testing.T, s store.Store) {
	o := mustOrg(t, s, "acme", "alice")
	p := mustProject(t, s, o.ID, "web")
	envs := map[string]string{} // name -> id
	steps := []struct {
		create    bool
		name, bp  string
		envs, bps int32
	}{
		{true, "a", "bp1", 1, 1},
		{true, "b", "bp1", 2, 1},
		{true, "c", "bp2", 3, 2},
		{true, "d", "", 4, 2}, // no blueprint counts as none
		{false, "a", "", 3, 2},
		{false, "b", "", 2, 1}, // the last of bp1
		{true, "e", "bp1", 3, 2},
		{false, "d", "", 2, 2},
		{false, "c", "", 1, 1},
		{false, "e", "", 0, 0},
	}
	for i, st := range steps {
		if st.create {
			envs[st.name] = mustEnv(t, s, p.ID, st.name, st.bp).ID
		} else if _, err := s.DeleteEnvironment(t.Context(), envs[st.name], t0); err != nil {
			t.Fatalf("step %d: DeleteEnvironment(%s): %v", i, st.name, err)
		}
		p, err := s.GetProject(t.Context(), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.EnvironmentCount != st.envs || p.BlueprintCount != st.bps {
			t.Errorf("step %d (%v %s): environments %d, blueprints %d; want %d, %d",
				i, st.create, st.name, p.EnvironmentCount, p.BlueprintCount, st.envs, st.bps)
		}
	}
	l, _, err := s.ListProjects(t.Context(), o.ID, store.Page{Size: 10})
	if err != nil || len(l) != 1 || l[0].EnvironmentCount != 0 || l[0].BlueprintCount != 0 {
		t.Errorf("ListProjects = %+v, %v", l, err)
	}
}

func testListEnvironments(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := mustOrg(t, s, "a", "alice")
	b := mustOrg(t, s, "b", "bob")
	mustJoin(t, s, b.ID, "carol", store.RoleMember)
	mustJoin(t, s, a.ID, "carol", store.RoleMember)
	pa := mustProject(t, s, a.ID, "pa")
	pa2 := mustProject(t, s, a.ID, "pa2")
	pb := mustProject(t, s, b.ID, "pb")
	ea := mustEnv(t, s, pa.ID, "e1", "bp").ID
	eb := mustEnv(t, s, pb.ID, "e1", "bp").ID
	ea2 := mustEnv(t, s, pa2.ID, "e1", "bp").ID
	ea3 := mustEnv(t, s, pa.ID, "e2", "bp").ID

	tests := []struct {
		name   string
		filter store.EnvironmentFilter
		want   []string
	}{
		{"everything", store.EnvironmentFilter{}, []string{ea, eb, ea2, ea3}},
		{"one project", store.EnvironmentFilter{ProjectID: pa.ID}, []string{ea, ea3}},
		{"alice's organizations", store.EnvironmentFilter{MemberOf: "alice"}, []string{ea, ea2, ea3}},
		{"bob's organizations", store.EnvironmentFilter{MemberOf: "bob"}, []string{eb}},
		{"carol's organizations", store.EnvironmentFilter{MemberOf: "carol"}, []string{ea, eb, ea2, ea3}},
		{"a stranger's", store.EnvironmentFilter{MemberOf: "mallory"}, nil},
		{"a project of a member", store.EnvironmentFilter{ProjectID: pa.ID, MemberOf: "alice"}, []string{ea, ea3}},
		{"a project of another organization", store.EnvironmentFilter{ProjectID: pa.ID, MemberOf: "bob"}, nil},
	}
	for _, tt := range tests {
		l, next, err := s.ListEnvironments(ctx, tt.filter, store.Page{Size: 10})
		got := ids(l, func(e store.Environment) string { return e.ID })
		if err != nil || next != "" || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, %q, %v; want %v", tt.name, got, next, err, tt.want)
		}
	}
	// Filters hold across pages.
	got, _ := pageThrough(t, 1, func(p store.Page) ([]string, string, error) {
		l, next, err := s.ListEnvironments(ctx, store.EnvironmentFilter{MemberOf: "alice"}, p)
		return ids(l, func(e store.Environment) string { return e.ID }), next, err
	})
	if want := []string{ea, ea2, ea3}; !slices.Equal(got, want) {
		t.Errorf("alice's by pages of 1: %v, want %v", got, want)
	}
}

func testEnvironmentsByCreator(t *testing.T, s store.Store) {
	ctx := t.Context()
	o := mustOrg(t, s, "a", "alice")
	p := mustProject(t, s, o.ID, "p")
	create := func(name, by string) store.Environment {
		t.Helper()
		e, err := s.CreateEnvironment(ctx, store.Environment{ProjectID: p.ID, Name: name, BlueprintID: "bp", CreatedAt: t0, CreatedBy: by})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetEnvironment(ctx, e.ID); err != nil || got.CreatedBy != by {
			t.Fatalf("GetEnvironment(%s) = %+v, %v; want created by %q", name, got, err, by)
		}
		return e
	}
	want := map[string][]string{}
	for i, by := range []string{"alice", "bob", "alice", "b o b", "", "bob", "alice"} {
		e := create(fmt.Sprintf("e%d", i), by)
		if by != "" {
			want[by] = append(want[by], e.ID)
		}
	}
	gone := create("gone", "alice")
	if _, err := s.DeleteEnvironment(ctx, gone.ID, t0); err != nil {
		t.Fatal(err)
	}
	for by, ids := range want {
		got, _ := pageThrough(t, 2, func(pg store.Page) ([]string, string, error) {
			l, next, err := s.EnvironmentsByCreator(ctx, by, pg)
			return idsOf(l, by), next, err
		})
		if !slices.Equal(got, ids) {
			t.Errorf("%q's by pages of 2: %v, want %v", by, got, ids)
		}
	}
	// Every creator's, by pages of 2: each creator's environments in order,
	// creators one after the other, none without a creator, none deleted.
	var got []string
	seen := map[string]bool{}
	last := ""
	token := ""
	for {
		l, next, err := s.EnvironmentsByCreator(ctx, "", store.Page{Size: 2, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l {
			if e.CreatedBy != last {
				if seen[e.CreatedBy] {
					t.Fatalf("creator %q listed twice apart", e.CreatedBy)
				}
				seen[e.CreatedBy], last = true, e.CreatedBy
			}
			got = append(got, e.CreatedBy+":"+e.ID)
		}
		if next == "" {
			break
		}
		token = next
	}
	var all []string
	for by, ids := range want {
		for _, id := range ids {
			all = append(all, by+":"+id)
		}
	}
	slices.Sort(all)
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if !slices.Equal(sorted, all) || len(seen) != len(want) {
		t.Errorf("every creator's: %v, want %v", got, all)
	}
	_, _, err := s.EnvironmentsByCreator(ctx, "", store.Page{Size: 2, Token: "bm9zcGFjZQ"})
	wantErr(t, "a token without a creator", err, store.ErrInvalidPageToken)
}

// idsOf is the ids of l, each checked to be created by by.
func idsOf(l []store.Environment, by string) []string {
	var out []string
	for _, e := range l {
		if e.CreatedBy != by {
			return append(out, "created by "+e.CreatedBy)
		}
		out = append(out, e.ID)
	}
	return out
}

// testUpgradeLeavesCreatorUnknown builds a database of the second schema
// version with an environment in it and opens it: the environment has no
// creator (none was recorded) and is listed by no creator.
func testUpgradeLeavesCreatorUnknown(t *testing.T, dsn string) {
	ctx := t.Context()
	db := rawDB(t, dsn)
	var stmts []string
	for _, f := range []string{"0001_init.sql", "0002_active_admins.sql"} {
		b, err := os.ReadFile(filepath.Join("migrations", f))
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, string(b))
	}
	stmts = append(stmts,
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init', 0), (2, '0002_active_admins', 0)`,
		`INSERT INTO organizations (id, name, display_name, billing_email, plan, member_count, admin_count, created_at)
			VALUES ('org_old', 'old', 'Old', 'b@old.example', 'free', 0, 0, 0)`,
		`INSERT INTO projects (id, organization_id, name, description, environment_count, blueprint_count, created_at)
			VALUES ('prj_old', 'org_old', 'p', '', 1, 0, 0)`,
		`INSERT INTO environments (id, project_id, organization_id, name, blueprint_id, status, created_at, ready_at)
			VALUES ('env_old', 'prj_old', 'org_old', 'e', '', 'PROVISIONING', 1, 1)`,
	)
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := open(t, dsn)
	wantMigrations(t, dsn)
	e, err := s.GetEnvironment(ctx, "env_old")
	if err != nil || e.CreatedBy != "" {
		t.Fatalf("the older environment after the upgrade: %+v, %v; want no creator", e, err)
	}
	if l, _, err := s.EnvironmentsByCreator(ctx, "", store.Page{Size: 10}); err != nil || len(l) != 0 {
		t.Errorf("every creator's environments after the upgrade: %v, %v; want none", l, err)
	}
}

// race runs each f at the same moment, as far as goroutines allow, and
// returns their errors.
func race(fs ...func() error) []error {
	errs := make([]error, len(fs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() {
			<-start
			errs[i] = f()
		})
	}
	close(start)
	wg.Wait()
	return errs
}

const rounds = 10

func testConcurrentOrganizationName(t *testing.T, s store.Store) {
	for round := range rounds {
		name := fmt.Sprintf("race%d", round)
		create := func() error {
			_, err := s.CreateOrganization(t.Context(), store.Organization{Name: name, CreatedAt: t0}, &store.Member{UserID: "alice"})
			return err
		}
		errs := race(create, create)
		ok, taken := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrOrganizationNameTaken):
				taken++
			default:
				t.Errorf("round %d: unexpected error %v", round, err)
			}
		}
		if ok != 1 || taken != 1 {
			t.Errorf("round %d: %d succeeded and %d found the name taken; want 1 and 1 (%v)", round, ok, taken, errs)
		}
	}
	l, _, err := s.ListOrganizations(t.Context(), "alice", store.Page{Size: 100})
	if err != nil || len(l) != rounds {
		t.Errorf("alice is a member of %d organizations, %v; want %d", len(l), err, rounds)
	}
}

func testConcurrentDemotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	for round := range rounds {
		o := mustOrg(t, s, fmt.Sprintf("race%d", round), "alice")
		mustJoin(t, s, o.ID, "bob", store.RoleAdmin)
		// The two demote, remove or suspend each other, by turns.
		demote := func(user string) func() error {
			return func() error {
				switch round % 3 {
				case 1:
					return s.RemoveMember(ctx, o.ID, user)
				case 2:
					_, err := s.UpdateMember(ctx, o.ID, user, store.MemberUpdate{Status: store.MemberSuspended})
					return err
				}
				_, err := s.UpdateMember(ctx, o.ID, user, store.MemberUpdate{Role: store.RoleMember})
				return err
			}
		}
		errs := race(demote("alice"), demote("bob"))
		ok, last := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrLastAdmin):
				last++
			default:
				t.Errorf("round %d: unexpected error %v", round, err)
			}
		}
		if ok != 1 || last != 1 {
			t.Errorf("round %d: %d succeeded, %d refused as last admin; want 1 and 1 (%v)", round, ok, last, errs)
		}
		members, _, err := s.ListMembers(ctx, o.ID, store.Page{Size: 10})
		if err != nil {
			t.Fatal(err)
		}
		admins := 0
		for _, m := range members {
			if m.Role == store.RoleAdmin && m.Status == store.MemberActive {
				admins++
			}
		}
		if admins != 1 {
			t.Errorf("round %d: %d active admins remain, want 1", round, admins)
		}
		wantOrgCounts(t, s, o.ID, 0, int32(len(members)))
	}
}

func testConcurrentProjects(t *testing.T, s store.Store) {
	o := mustOrg(t, s, "acme", "alice")
	const n = 20
	var fs []func() error
	for i := range n {
		fs = append(fs, func() error {
			_, err := s.CreateProject(t.Context(), store.Project{OrganizationID: o.ID, Name: fmt.Sprintf("p%d", i), CreatedAt: t0})
			return err
		})
	}
	for _, err := range race(fs...) {
		if err != nil {
			t.Errorf("CreateProject: %v", err)
		}
	}
	wantOrgCounts(t, s, o.ID, n, 1)
	l, _, err := s.ListProjects(t.Context(), o.ID, store.Page{Size: 100})
	if err != nil || len(l) != n {
		t.Errorf("ListProjects: %d projects, %v; want %d", len(l), err, n)
	}
}

func testConcurrentEnvironments(t *testing.T, s store.Store) {
	o := mustOrg(t, s, "acme", "alice")
	p := mustProject(t, s, o.ID, "web")
	const n = 12
	var ids []string
	for i := range n / 2 {
		ids = append(ids, mustEnv(t, s, p.ID, fmt.Sprintf("old%d", i), fmt.Sprintf("bp%d", i%3)).ID)
	}
	// Half create and half delete, over the same three blueprints.
	var fs []func() error
	for i := range n {
		if i%2 == 0 {
			fs = append(fs, func() error {
				_, err := s.CreateEnvironment(t.Context(), store.Environment{ProjectID: p.ID, Name: fmt.Sprintf("new%d", i), BlueprintID: fmt.Sprintf("bp%d", i%3), CreatedAt: t0})
				return err
			})
		} else {
			id := ids[i/2]
			fs = append(fs, func() error { _, err := s.DeleteEnvironment(t.Context(), id, t0); return err })
		}
	}
	for _, err := range race(fs...) {
		if err != nil {
			t.Errorf("create or delete: %v", err)
		}
	}
	// Left: new0, new2, …, new10 with bp0, bp2, bp1, bp0, bp2, bp1.
	wantProjectCounts(t, s, p.ID, n/2, 3)
}

func testReopen(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := mustOrg(t, s, "acme", "alice")
	again := open(t, dsn) // while the first is open
	if got, err := again.GetOrganization(t.Context(), o.ID); err != nil || got != o {
		t.Errorf("reopened: GetOrganization = %+v, %v; want %+v", got, err, o)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	third := open(t, dsn)
	if got, err := third.GetOrganization(t.Context(), o.ID); err != nil || got != o {
		t.Errorf("reopened: GetOrganization = %+v, %v; want %+v", got, err, o)
	}
	wantMigrations(t, dsn)
}

func testConcurrentOpen(t *testing.T, dsn string) {
	var fs []func() error
	stores := make([]store.Store, 4)
	for i := range stores {
		fs = append(fs, func() error {
			s, err := store.Open(t.Context(), dsn)
			stores[i] = s
			return err
		})
	}
	errs := race(fs...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open: %v", err)
			continue
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	wantMigrations(t, dsn)
	for i, s := range stores {
		if s != nil {
			mustOrg(t, s, fmt.Sprintf("org%d", i), "")
		}
	}
}

// testUpgradeRecountsActiveAdmins builds a database of the first schema
// version by hand, with an admin suspended in storage (as an operator could
// before suspension was an operation), and opens it: the upgrade must
// recount, so that the other admin is the last active one.
func testUpgradeRecountsActiveAdmins(t *testing.T, dsn string) {
	ctx := t.Context()
	db := rawDB(t, dsn)
	schema, err := os.ReadFile(filepath.Join("migrations", "0001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(schema),
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init', 0)`,
		`INSERT INTO organizations (id, name, display_name, billing_email, plan, member_count, admin_count, created_at)
			VALUES ('org_old', 'old', 'Old', 'b@old.example', 'free', 2, 2, 0)`,
		`INSERT INTO members (organization_id, user_id, email, name, role, status, joined_at, last_active_at)
			VALUES ('org_old', 'alice', 'alice@example.com', 'Alice', 'admin', 'active', 0, 0),
			       ('org_old', 'bob', 'bob@example.com', 'Bob', 'admin', 'suspended', 0, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := open(t, dsn)
	wantMigrations(t, dsn)
	_, err = s.UpdateMember(ctx, "org_old", "alice", store.MemberUpdate{Role: store.RoleMember})
	wantErr(t, "demoting alice, the only active admin after the upgrade", err, store.ErrLastAdmin)
	_, err = s.UpdateMember(ctx, "org_old", "alice", store.MemberUpdate{Status: store.MemberSuspended})
	wantErr(t, "suspending alice, the only active admin after the upgrade", err, store.ErrLastAdmin)
	if _, err := s.UpdateMember(ctx, "org_old", "bob", store.MemberUpdate{Status: store.MemberActive}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateMember(ctx, "org_old", "alice", store.MemberUpdate{Role: store.RoleMember}); err != nil {
		t.Errorf("demoting alice beside the reinstated bob: %v", err)
	}
}

// rawDB opens the database behind a store DSN with database/sql, bypassing
// the store.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driver := "pgx"
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		driver, dsn = "sqlite", path
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// wantMigrations checks that the database has recorded every migration of
// the migrations directory.
func wantMigrations(t *testing.T, dsn string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v, %v", files, err)
	}
	want := len(files)
	db := rawDB(t, dsn)
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%d migrations recorded, want %d", n, want)
	}
}

func TestOpenChoosesBackendByDSN(t *testing.T) {
	dir := t.TempDir()
	for _, dsn := range []string{
		filepath.Join(dir, "bare.db"),
		"sqlite:" + filepath.Join(dir, "prefixed.db"),
		"sqlite://" + filepath.Join(dir, "url.db"),
	} {
		s, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Errorf("Open(%q): %v", dsn, err)
			continue
		}
		if _, err := s.CreateOrganization(t.Context(), store.Organization{Name: "x", CreatedAt: t0}, nil); err != nil {
			t.Errorf("%s: CreateOrganization: %v", dsn, err)
		}
		s.Close()
	}
	for _, name := range []string{"bare.db", "prefixed.db", "url.db"} {
		wantMigrations(t, "sqlite:"+filepath.Join(dir, name))
	}
	for _, dsn := range []string{"mysql://localhost/db", "", ":memory:", filepath.Join(dir, "x.db?mode=ro")} {
		if s, err := store.Open(t.Context(), dsn); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", dsn)
		}
	}
}
