package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"connectrpc.com/connect"
	flag "github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
)

// commands is every subcommand, in the order -h lists them.
var commands = []command{
	{name: "login", summary: "log in with the OIDC device flow: prints a link and a code to approve in a browser", kind: localOnly, define: defineLogin},
	{name: "logout", summary: "forget the context's tokens", kind: localOnly, define: defineLogout},
	{name: "whoami", summary: "show the context, its addresses and who its token is for (never the token)", kind: localOnly, define: defineWhoami},
	{name: "context list", summary: "list the contexts of the config file; * marks the current one", kind: configOnly, define: defineContextList},
	{name: "context use", args: "NAME", summary: "make NAME the current context", kind: configOnly, define: defineContextUse, completeArgs: contextNames},
	{name: "context set", args: "NAME", summary: "add or change a context (--api, --issuer, --client-id; --use makes it current)", kind: configOnly, define: defineContextSet},
	{name: "context delete", args: "NAME", summary: "remove a context and its tokens", kind: configOnly, define: defineContextDelete, completeArgs: contextNames},

	{name: "orgs create", args: "NAME", summary: "create an organization (you become its admin)", kind: mutatesAPI, define: defineOrgCreate},
	{name: "orgs list", summary: "list the organizations you belong to", kind: callsAPI, define: defineOrgList},
	{name: "orgs get", args: "ORG_ID", summary: "show an organization", kind: callsAPI, define: defineOrgGet},
	{name: "orgs update", args: "ORG_ID", summary: "change an organization's display name or billing e-mail", kind: mutatesAPI, define: defineOrgUpdate},
	{name: "orgs delete", args: "ORG_ID", summary: "delete an organization (--force: with its projects, after asking; --yes: without)", kind: mutatesAPI, define: defineOrgDelete},

	{name: "projects create", args: "NAME", summary: "create a project in --org", kind: mutatesAPI, define: defineProjectCreate},
	{name: "projects list", summary: "list the projects of --org", kind: callsAPI, define: defineProjectList},
	{name: "projects get", args: "PROJECT_ID", summary: "show a project", kind: callsAPI, define: defineProjectGet},
	{name: "projects update", args: "PROJECT_ID", summary: "change a project's name or description", kind: mutatesAPI, define: defineProjectUpdate},
	{name: "projects delete", args: "PROJECT_ID", summary: "delete a project (--force: with its environments, after asking; --yes: without)", kind: mutatesAPI, define: defineProjectDelete},

	{name: "members list", summary: "list the members of --org (--invitations: and pending invitations)", kind: callsAPI, define: defineMemberList},
	{name: "members invite", args: "EMAIL", summary: "invite a person to --org as --role", kind: mutatesAPI, define: defineMemberInvite},
	{name: "members update", args: "USER_ID", summary: "change a member's --role or --status in --org", kind: mutatesAPI, define: defineMemberUpdate},
	{name: "members remove", args: "USER_ID", summary: "remove a member from --org (yourself: leave)", kind: mutatesAPI, define: defineMemberRemove},

	{name: "envs create", args: "NAME", summary: "create an environment in --project from --blueprint", kind: mutatesAPI, define: defineEnvCreate},
	{name: "envs list", summary: "list environments (--project: of one project)", kind: callsAPI, define: defineEnvList},
	{name: "envs get", args: "ENV_ID", summary: "show an environment", kind: callsAPI, define: defineEnvGet},
	{name: "envs watch", args: "ENV_ID", summary: "stream an environment's status until it leaves PROVISIONING (Ctrl-C stops)", kind: callsAPI, define: defineEnvWatch},
	{name: "envs delete", args: "ENV_ID", summary: "delete an environment", kind: mutatesAPI, define: defineEnvDelete},

	{name: "blueprints search", args: "[QUERY]", summary: "search the blueprint catalog", kind: callsAPI, define: defineBlueprintSearch},
	{name: "blueprints validate", args: "FILE", summary: "validate a blueprint document (- reads standard input); exit 1 when not valid", long: blueprintFormat, kind: callsAPI, define: defineBlueprintValidate},

	{name: "usage", summary: "show what you used beside your plan's limits: requests today and this month, environments, compute", kind: callsAPI, define: defineUsage},

	{name: "version", summary: "print orgctl's version, and the Go version and platform it was built with", kind: configOnly, define: defineVersion},
	{name: "completion", args: "SHELL", summary: "print the completion script of a shell: bash, zsh, fish or powershell", long: completionHelp,
		kind: configOnly, define: defineCompletion, completeArgs: func(*app) []string { return shells }},
}

// show prints a call's answer: the whole response as JSON, or record (the
// resource inside it) as a table.
func (a *app) show(resp, record proto.Message) error {
	if a.g.output == formatJSON {
		return writeJSON(a.stdout, resp, true)
	}
	return writeRecord(a.stdout, record)
}

// callShow sends req with rpc and shows the answer (a.show).
func callShow[Req, Res any](ctx context.Context, a *app, rpc func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) error {
	resp, err := rpc(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	m := any(resp.Msg).(proto.Message)
	return a.show(m, m)
}

// done prints the answer of a call that returns nothing: {} as JSON, a
// sentence otherwise.
func (a *app) done(resp proto.Message, sentence string) error {
	if a.g.output == formatJSON {
		return writeJSON(a.stdout, resp, true)
	}
	_, err := fmt.Fprintln(a.stdout, sentence)
	return err
}

// paging is the flags of a list.
type paging struct {
	size  int
	token string
	all   bool
}

func (p *paging) define(fs *flag.FlagSet) {
	fs.IntVar(&p.size, "page-size", 0, "entries per page (0: the API's default, 50; at most 1000)")
	fs.StringVar(&p.token, "page-token", "", "page to show: the next page token a previous list printed")
	fs.BoolVar(&p.all, "all", false, "fetch every page")
}

// list runs a paginated call: one page, or all of them merged into the
// first answer (with --all). field names the repeated field a table shows.
func (a *app) list(ctx context.Context, p paging, field protoreflect.Name, fetch func(ctx context.Context, size int32, token string) (proto.Message, error)) error {
	resp, err := fetch(ctx, int32(p.size), p.token)
	if err != nil {
		return err
	}
	nextFD := resp.ProtoReflect().Descriptor().Fields().ByName("next_page_token")
	next := resp.ProtoReflect().Get(nextFD).String()
	for p.all && next != "" {
		page, err := fetch(ctx, int32(p.size), next)
		if err != nil {
			return err
		}
		next = page.ProtoReflect().Get(nextFD).String()
		proto.Merge(resp, page) // appends the page's entries
	}
	if p.all {
		resp.ProtoReflect().Clear(nextFD)
	}
	if a.g.output == formatJSON {
		return writeJSON(a.stdout, resp, true)
	}
	desc, rows := listRows(resp, field)
	if err := writeTable(a.stdout, desc, rows); err != nil {
		return err
	}
	if next != "" && !p.all {
		fmt.Fprintf(a.stderr, "More: --page-token %s (or --all)\n", next)
	}
	return nil
}

// --- session and contexts ---

func defineLogin(fs *flag.FlagSet) runFunc {
	browser := fs.Bool("browser", false, "also open the link in a browser, when one is available")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		return login(ctx, a.settings, a.hc, a.stderr, *browser)
	}
}

func defineLogout(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		err := os.Remove(a.settings.sessionPath())
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("logout: %w", err)
		}
		fmt.Fprintf(a.stderr, "Logged out of %s.\n", a.settings.contextName)
		return nil
	}
}

func defineWhoami(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		s := a.settings
		fmt.Fprintf(a.stdout, "Context    %s\nAPI        %s\nIssuer     %s\nClient     %s\n", s.contextName, s.API, s.Issuer, s.ClientID)
		if s.clientSecret != "" {
			fmt.Fprintln(a.stdout, "Identity   service account (client credentials: a new token for each command)")
			return nil
		}
		sess, err := s.loadSession()
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "User       %s\nSubject    %s\nToken      expires %s (refreshed before a call when about to expire)\n",
			sess.Username, sess.Subject, sess.Expiry.UTC().Format("2006-01-02T15:04:05Z"))
		return nil
	}
}

// loadForEdit reads the config file for a context command.
func (a *app) loadForEdit() (dirs, *configFile, error) {
	d, err := locate(a.getenv, a.g.config)
	if err != nil {
		return dirs{}, nil, err
	}
	f, err := loadConfig(d.config)
	return d, f, err
}

func defineContextList(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		_, f, err := a.loadForEdit()
		if err != nil {
			return err
		}
		current := first(a.getenv(envContext), f.CurrentContext, devContext)
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tAPI\tISSUER\tCLIENT ID")
		for _, n := range f.names() {
			c, _ := f.context(n)
			mark := ""
			if n == current {
				mark = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, n, c.API, c.Issuer, c.ClientID)
		}
		return tw.Flush()
	}
}

func defineContextUse(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "NAME"); err != nil {
			return err
		}
		d, f, err := a.loadForEdit()
		if err != nil {
			return err
		}
		if _, ok := f.context(args[0]); !ok {
			return usageErrorf("no context %q in %s", args[0], d.config)
		}
		f.CurrentContext = args[0]
		if err := f.save(d.config); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "Using context %s.\n", args[0])
		return nil
	}
}

func defineContextSet(fs *flag.FlagSet) runFunc {
	api := fs.String("api", "", "API address")
	issuer := fs.String("issuer", "", "OIDC issuer URL")
	clientID := fs.String("client-id", "", "the command-line client's id at the issuer")
	use := fs.Bool("use", false, "also make it the current context")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "NAME"); err != nil {
			return err
		}
		d, f, err := a.loadForEdit()
		if err != nil {
			return err
		}
		c, _ := f.context(args[0])
		c.API, c.Issuer, c.ClientID = first(*api, c.API), first(*issuer, c.Issuer), first(*clientID, c.ClientID)
		if c.API == "" || c.Issuer == "" || c.ClientID == "" {
			return usageErrorf("a new context needs --api, --issuer and --client-id")
		}
		if f.Contexts == nil {
			f.Contexts = map[string]Context{}
		}
		f.Contexts[args[0]] = c
		if *use {
			f.CurrentContext = args[0]
		}
		if err := f.save(d.config); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "Context %s saved in %s.\n", args[0], d.config)
		return nil
	}
}

func defineContextDelete(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "NAME"); err != nil {
			return err
		}
		d, f, err := a.loadForEdit()
		if err != nil {
			return err
		}
		if _, ok := f.Contexts[args[0]]; !ok {
			return usageErrorf("no context %q in %s", args[0], d.config)
		}
		delete(f.Contexts, args[0])
		if f.CurrentContext == args[0] {
			f.CurrentContext = ""
		}
		if err := f.save(d.config); err != nil {
			return err
		}
		s := settings{dirs: d, contextName: args[0]}
		if err := os.Remove(s.sessionPath()); err != nil && !os.IsNotExist(err) {
			return err
		}
		fmt.Fprintf(a.stderr, "Context %s deleted.\n", args[0])
		return nil
	}
}

// --- organizations ---

func defineOrgCreate(fs *flag.FlagSet) runFunc {
	display := fs.String("display-name", "", "display name (default: the name)")
	billing := fs.String("billing-email", "", "billing e-mail address")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "NAME"); err != nil {
			return err
		}
		resp, err := a.api.orgs.CreateOrganization(ctx, connect.NewRequest(&svcv1.CreateOrganizationRequest{
			Name: args[0], DisplayName: *display, BillingEmail: *billing}))
		if err != nil {
			return err
		}
		return a.show(resp.Msg, resp.Msg)
	}
}

func defineOrgList(fs *flag.FlagSet) runFunc {
	var p paging
	p.define(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		return a.list(ctx, p, "organizations", func(ctx context.Context, size int32, token string) (proto.Message, error) {
			resp, err := a.api.orgs.ListOrganizations(ctx, connect.NewRequest(&svcv1.ListOrganizationsRequest{PageSize: size, PageToken: token}))
			if err != nil {
				return nil, err
			}
			return resp.Msg, nil
		})
	}
}

func defineOrgGet(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "ORG_ID"); err != nil {
			return err
		}
		return callShow(ctx, a, a.api.orgs.GetOrganization, &svcv1.GetOrganizationRequest{OrganizationId: args[0]})
	}
}

// optional returns a pointer to the flag's value when it was given, nil
// otherwise: update calls change only what the user names.
func optional(fs *flag.FlagSet, name string, v *string) *string {
	if !fs.Changed(name) {
		return nil
	}
	return v
}

func defineOrgUpdate(fs *flag.FlagSet) runFunc {
	display := fs.String("display-name", "", "new display name")
	billing := fs.String("billing-email", "", "new billing e-mail address")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "ORG_ID"); err != nil {
			return err
		}
		req := &svcv1.UpdateOrganizationRequest{OrganizationId: args[0],
			DisplayName: optional(fs, "display-name", display), BillingEmail: optional(fs, "billing-email", billing)}
		if req.DisplayName == nil && req.BillingEmail == nil {
			return usageErrorf("nothing to change: give --display-name or --billing-email")
		}
		return callShow(ctx, a, a.api.orgs.UpdateOrganization, req)
	}
}

func defineOrgDelete(fs *flag.FlagSet) runFunc {
	force := fs.Bool("force", false, "also delete its projects and their environments (asks first, unless --yes)")
	yes := fs.BoolP("yes", "y", false, "with --force, delete without asking (scripts)")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "ORG_ID"); err != nil {
			return err
		}
		if *force {
			if err := a.confirm(ctx, "Delete organization "+args[0]+" with all its projects and their environments?", *yes); err != nil {
				return err
			}
		}
		resp, err := a.api.orgs.DeleteOrganization(ctx, connect.NewRequest(&svcv1.DeleteOrganizationRequest{OrganizationId: args[0], Force: *force}))
		if err != nil {
			return err
		}
		return a.done(resp.Msg, "Deleted organization "+args[0]+".")
	}
}

// --- projects ---

func defineProjectCreate(fs *flag.FlagSet) runFunc {
	org := fs.String("org", "", "organization id (required)")
	description := fs.String("description", "", "description")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "NAME"); err != nil {
			return err
		}
		if *org == "" {
			return usageErrorf("--org is required")
		}
		return callShow(ctx, a, a.api.orgs.CreateProject, &svcv1.CreateProjectRequest{OrganizationId: *org, Name: args[0], Description: *description})
	}
}

func defineProjectList(fs *flag.FlagSet) runFunc {
	org := fs.String("org", "", "organization id (required)")
	var p paging
	p.define(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		if *org == "" {
			return usageErrorf("--org is required")
		}
		return a.list(ctx, p, "projects", func(ctx context.Context, size int32, token string) (proto.Message, error) {
			resp, err := a.api.orgs.ListProjects(ctx, connect.NewRequest(&svcv1.ListProjectsRequest{OrganizationId: *org, PageSize: size, PageToken: token}))
			if err != nil {
				return nil, err
			}
			return resp.Msg, nil
		})
	}
}

func defineProjectGet(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "PROJECT_ID"); err != nil {
			return err
		}
		return callShow(ctx, a, a.api.orgs.GetProject, &svcv1.GetProjectRequest{ProjectId: args[0]})
	}
}

func defineProjectUpdate(fs *flag.FlagSet) runFunc {
	name := fs.String("name", "", "new name")
	description := fs.String("description", "", "new description")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "PROJECT_ID"); err != nil {
			return err
		}
		req := &svcv1.UpdateProjectRequest{ProjectId: args[0], Name: optional(fs, "name", name), Description: optional(fs, "description", description)}
		if req.Name == nil && req.Description == nil {
			return usageErrorf("nothing to change: give --name or --description")
		}
		return callShow(ctx, a, a.api.orgs.UpdateProject, req)
	}
}

func defineProjectDelete(fs *flag.FlagSet) runFunc {
	force := fs.Bool("force", false, "also delete its environments (asks first, unless --yes)")
	yes := fs.BoolP("yes", "y", false, "with --force, delete without asking (scripts)")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "PROJECT_ID"); err != nil {
			return err
		}
		if *force {
			if err := a.confirm(ctx, "Delete project "+args[0]+" with all its environments?", *yes); err != nil {
				return err
			}
		}
		resp, err := a.api.orgs.DeleteProject(ctx, connect.NewRequest(&svcv1.DeleteProjectRequest{ProjectId: args[0], Force: *force}))
		if err != nil {
			return err
		}
		return a.done(resp.Msg, "Deleted project "+args[0]+".")
	}
}

// --- members and invitations ---

func defineMemberList(fs *flag.FlagSet) runFunc {
	org := fs.String("org", "", "organization id (required)")
	invitations := fs.Bool("invitations", false, "also list pending invitations")
	var p paging
	p.define(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		if *org == "" {
			return usageErrorf("--org is required")
		}
		var invited []*svcv1.Invitation
		err := a.list(ctx, p, "members", func(ctx context.Context, size int32, token string) (proto.Message, error) {
			resp, err := a.api.orgs.ListMembers(ctx, connect.NewRequest(&svcv1.ListMembersRequest{
				OrganizationId: *org, IncludeInvitations: *invitations, PageSize: size, PageToken: token}))
			if err != nil {
				return nil, err
			}
			invited = append(invited, resp.Msg.GetInvitations()...)
			return resp.Msg, nil
		})
		if err != nil || a.g.output == formatJSON || !*invitations {
			return err
		}
		fmt.Fprintln(a.stdout, "\nInvitations:")
		rows := make([]protoreflect.Message, len(invited))
		for i, inv := range invited {
			rows[i] = inv.ProtoReflect()
		}
		return writeTable(a.stdout, (&svcv1.Invitation{}).ProtoReflect().Descriptor(), rows)
	}
}

func defineMemberInvite(fs *flag.FlagSet) runFunc {
	org := fs.String("org", "", "organization id (required)")
	role := fs.String("role", "member", "role: member or admin")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "EMAIL"); err != nil {
			return err
		}
		if *org == "" {
			return usageErrorf("--org is required")
		}
		return callShow(ctx, a, a.api.orgs.InviteMember, &svcv1.InviteMemberRequest{OrganizationId: *org, Email: args[0], Role: *role})
	}
}

func defineMemberUpdate(fs *flag.FlagSet) runFunc {
	org := fs.String("org", "", "organization id (required)")
	role := fs.String("role", "", "new role: member or admin")
	status := fs.String("status", "", "new status: active or suspended")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "USER_ID"); err != nil {
			return err
		}
		if *org == "" {
			return usageErrorf("--org is required")
		}
		req := &svcv1.UpdateMemberRequest{OrganizationId: *org, UserId: args[0], Role: *role, Status: optional(fs, "status", status)}
		if req.Role == "" && req.Status == nil {
			return usageErrorf("nothing to change: give --role or --status")
		}
		return callShow(ctx, a, a.api.orgs.UpdateMember, req)
	}
}

func defineMemberRemove(fs *flag.FlagSet) runFunc {
	org := fs.String("org", "", "organization id (required)")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "USER_ID"); err != nil {
			return err
		}
		if *org == "" {
			return usageErrorf("--org is required")
		}
		resp, err := a.api.orgs.RemoveMember(ctx, connect.NewRequest(&svcv1.RemoveMemberRequest{OrganizationId: *org, UserId: args[0]}))
		if err != nil {
			return err
		}
		return a.done(resp.Msg, "Removed member "+args[0]+" from organization "+*org+".")
	}
}

// --- environments ---

func defineEnvCreate(fs *flag.FlagSet) runFunc {
	project := fs.String("project", "", "project id (required)")
	blueprint := fs.String("blueprint", "", "blueprint id (required; orgctl blueprints search lists them)")
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "NAME"); err != nil {
			return err
		}
		if *project == "" || *blueprint == "" {
			return usageErrorf("--project and --blueprint are required")
		}
		resp, err := a.api.envs.CreateEnvironment(ctx, connect.NewRequest(&svcv1.CreateEnvironmentRequest{Name: args[0], ProjectId: *project, BlueprintId: *blueprint}))
		if err != nil {
			return err
		}
		return a.show(resp.Msg, resp.Msg.GetEnvironment())
	}
}

func defineEnvList(fs *flag.FlagSet) runFunc {
	project := fs.String("project", "", "only this project's environments")
	var p paging
	p.define(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		return a.list(ctx, p, "environments", func(ctx context.Context, size int32, token string) (proto.Message, error) {
			resp, err := a.api.envs.ListEnvironments(ctx, connect.NewRequest(&svcv1.ListEnvironmentsRequest{ProjectId: *project, PageSize: size, PageToken: token}))
			if err != nil {
				return nil, err
			}
			return resp.Msg, nil
		})
	}
}

func defineEnvGet(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "ENV_ID"); err != nil {
			return err
		}
		resp, err := a.api.envs.GetEnvironment(ctx, connect.NewRequest(&svcv1.GetEnvironmentRequest{EnvironmentId: args[0]}))
		if err != nil {
			return err
		}
		return a.show(resp.Msg, resp.Msg.GetEnvironment())
	}
}

func defineEnvDelete(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "ENV_ID"); err != nil {
			return err
		}
		resp, err := a.api.envs.DeleteEnvironment(ctx, connect.NewRequest(&svcv1.DeleteEnvironmentRequest{EnvironmentId: args[0]}))
		if err != nil {
			return err
		}
		return a.show(resp.Msg, resp.Msg.GetEnvironment())
	}
}

// --- blueprints and usage ---

func defineBlueprintSearch(fs *flag.FlagSet) runFunc {
	var p paging
	p.define(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if len(args) > 1 {
			return usageErrorf("want at most one argument: QUERY")
		}
		query := ""
		if len(args) == 1 {
			query = args[0]
		}
		return a.list(ctx, p, "blueprints", func(ctx context.Context, size int32, token string) (proto.Message, error) {
			resp, err := a.api.blueprint.SearchCatalog(ctx, connect.NewRequest(&svcv1.SearchCatalogRequest{Query: query, PageSize: size, PageToken: token}))
			if err != nil {
				return nil, err
			}
			return resp.Msg, nil
		})
	}
}

// blueprintFormat is what `blueprints validate -h` says of the document it
// checks: what the API's validator (orgsvc/catalog) accepts.
const blueprintFormat = `A blueprint document is YAML or JSON (JSON is read as YAML), at most 1 MiB,
holding one mapping:

  name: my-stack            # required, a DNS label
  description: free text    # optional, at most 2000 characters
  services:                 # required, 1 to 50 services, keyed by DNS-label names
    web:
      image: nginx:1.27     # required, not empty, no whitespace
      ports: [8080]         # optional, each 1 to 65535, no duplicates within the service
      env: {KEY: value}     # optional, keys match ^[A-Za-z_][A-Za-z0-9_]*$,
                            # values are strings, numbers or booleans
      depends_on: [db]      # optional, each names another service of the document,
                            # no duplicates, no dependency cycles
      resources: {vcpus: 2, memory_gb: 4}  # optional, vcpus 1 to 64, memory_gb 1 to 512
    db:
      image: postgres:16

A DNS label is 1 to 63 characters of a-z, 0-9 and '-' that neither starts nor
ends with '-'. No other field is allowed; a value of the wrong type (a port
"8080" rather than 8080), a repeated key, more than one document, or an anchor
or alias (&a, *a) is a violation. An optional field set to null counts as
absent.

A valid document prints "valid" (exit 0). One that is not prints a table of
its violations (exit 1), each with its path from the top of the document
(services.web.ports[1]; services["my web"] for a key with other characters)
and what is wrong; -o json prints the API's answer, {"valid": ..., "violations": [...]}.`

// maxBlueprint is the API's bound on a blueprint document.
const maxBlueprint = 1 << 20

func defineBlueprintValidate(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args, "FILE"); err != nil {
			return err
		}
		var r io.Reader = a.stdin
		if args[0] != "-" {
			f, err := os.Open(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			defer f.Close()
			r = f
		}
		content, err := io.ReadAll(io.LimitReader(r, maxBlueprint+1))
		if err != nil {
			return fmt.Errorf("read %s: %w", args[0], err)
		}
		if len(content) > maxBlueprint {
			return usageErrorf("%s: larger than the API's 1 MiB", args[0])
		}
		resp, err := a.api.blueprint.ValidateBlueprint(ctx, connect.NewRequest(&svcv1.ValidateBlueprintRequest{Content: string(content)}))
		if err != nil {
			return err
		}
		if a.g.output == formatJSON {
			err = writeJSON(a.stdout, resp.Msg, true)
		} else if resp.Msg.GetValid() {
			_, err = fmt.Fprintln(a.stdout, "valid")
		} else {
			desc, rows := listRows(resp.Msg, "violations")
			err = writeTable(a.stdout, desc, rows)
		}
		if err == nil && !resp.Msg.GetValid() {
			err = errInvalidBlueprint
		}
		return err
	}
}

func defineUsage(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, a *app, args []string) error {
		if err := wantArgs(args); err != nil {
			return err
		}
		resp, err := a.api.usage.GetUsage(ctx, connect.NewRequest(&svcv1.GetUsageRequest{}))
		if err != nil {
			return err
		}
		if a.g.output == formatJSON {
			return writeJSON(a.stdout, resp.Msg, true)
		}
		return writeUsage(a.stdout, resp.Msg)
	}
}
