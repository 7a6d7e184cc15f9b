package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

const organizationColumns = "id, name, display_name, billing_email, plan, project_count, member_count, created_at"

func scanOrganization(row scanner) (Organization, error) {
	var o Organization
	var created int64
	err := row.Scan(&o.ID, &o.Name, &o.DisplayName, &o.BillingEmail, &o.Plan,
		&o.ProjectCount, &o.MemberCount, &created)
	o.CreatedAt = fromMicros(created)
	return o, err
}

func (s *sqlStore) CreateOrganization(ctx context.Context, org Organization, admin *Member) (Organization, error) {
	id, err := orNewID(org.ID, "org_")
	if err != nil {
		return Organization{}, opError("create organization", err)
	}
	org.ID = id
	org.ProjectCount = 0
	org.MemberCount = 0
	var first *Member
	if admin != nil && admin.UserID != "" {
		m := *admin
		m.OrganizationID = org.ID
		m.Role = RoleAdmin
		if m.Status == "" {
			m.Status = MemberActive
		}
		if m.JoinedAt.IsZero() {
			m.JoinedAt = org.CreatedAt
		}
		if m.LastActiveAt.IsZero() {
			m.LastActiveAt = m.JoinedAt
		}
		first = &m
		org.MemberCount = 1
	}
	admins := 0
	if first != nil {
		admins = activeAdmins(first.Role, first.Status)
	}
	err = s.inTx(ctx, func(r runner) error {
		_, err := r.exec(ctx, `INSERT INTO organizations
			(id, name, display_name, billing_email, plan, project_count, member_count, admin_count, created_at)
			VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)`,
			org.ID, org.Name, org.DisplayName, org.BillingEmail, org.Plan,
			org.MemberCount, admins, micros(org.CreatedAt))
		if s.d.uniqueViolation(err, organizationNameKey) {
			return ErrOrganizationNameTaken
		}
		if err != nil || first == nil {
			return err
		}
		return insertMember(ctx, r, *first)
	})
	if err != nil {
		return Organization{}, opError("create organization", err)
	}
	org.CreatedAt = fromMicros(micros(org.CreatedAt))
	return org, nil
}

func (s *sqlStore) GetOrganization(ctx context.Context, id string) (Organization, error) {
	o, err := scanOrganization(s.read().queryRow(ctx,
		"SELECT "+organizationColumns+" FROM organizations WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Organization{}, ErrOrganizationNotFound
	}
	return o, opError("get organization", err)
}

func (s *sqlStore) ListOrganizations(ctx context.Context, userID string, page Page) ([]OrganizationSummary, string, error) {
	after, err := decodeToken(page.Token)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(page)
	var rows *sql.Rows
	if userID == "" {
		rows, err = s.read().query(ctx, `SELECT `+organizationColumns+`, ''
			FROM organizations WHERE id > ? ORDER BY id LIMIT ?`, after, size+1)
	} else {
		rows, err = s.read().query(ctx, `SELECT o.id, o.name, o.display_name, o.billing_email, o.plan,
				o.project_count, o.member_count, o.created_at, m.role
			FROM members m JOIN organizations o ON o.id = m.organization_id
			WHERE m.user_id = ? AND m.status = ? AND o.id > ? ORDER BY o.id LIMIT ?`, userID, MemberActive, after, size+1)
	}
	if err != nil {
		return nil, "", opError("list organizations", err)
	}
	list, err := collect(rows, func(row scanner) (OrganizationSummary, error) {
		var o OrganizationSummary
		var created int64
		err := row.Scan(&o.ID, &o.Name, &o.DisplayName, &o.BillingEmail, &o.Plan,
			&o.ProjectCount, &o.MemberCount, &created, &o.Role)
		o.CreatedAt = fromMicros(created)
		return o, err
	})
	if err != nil {
		return nil, "", opError("list organizations", err)
	}
	list, next := paginate(list, size, func(o OrganizationSummary) string { return o.ID })
	return list, next, nil
}

func (s *sqlStore) UpdateOrganization(ctx context.Context, id string, displayName, billingEmail *string) (Organization, error) {
	o, err := scanOrganization(s.read().queryRow(ctx, `UPDATE organizations SET
			display_name = COALESCE(?, display_name),
			billing_email = COALESCE(?, billing_email)
		WHERE id = ? RETURNING `+organizationColumns,
		nullable(displayName), nullable(billingEmail), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Organization{}, ErrOrganizationNotFound
	}
	return o, opError("update organization", err)
}

func (s *sqlStore) DeleteOrganization(ctx context.Context, id string, force bool, now time.Time) ([]Environment, error) {
	var ended []Environment
	err := s.inTx(ctx, func(r runner) error {
		if ok, err := exists(ctx, r, "SELECT 1 FROM organizations WHERE id = ?"+s.d.lockRow, id); err != nil {
			return err
		} else if !ok {
			return ErrOrganizationNotFound
		}
		projects, err := queryAll(ctx, r, scanString,
			"SELECT id FROM projects WHERE organization_id = ? ORDER BY id"+s.d.lockRow, id)
		if err != nil {
			return err
		}
		if len(projects) > 0 && !force {
			return ErrOrganizationHasProjects
		}
		envs, err := queryAll(ctx, r, scanEnvironment,
			"SELECT "+environmentColumns+" FROM environments WHERE organization_id = ? ORDER BY id", id)
		if err != nil {
			return err
		}
		for _, q := range []string{
			"DELETE FROM environments WHERE organization_id = ?",
			"DELETE FROM project_blueprints WHERE project_id IN (SELECT id FROM projects WHERE organization_id = ?)",
			"DELETE FROM projects WHERE organization_id = ?",
			"DELETE FROM invitations WHERE organization_id = ?",
			"DELETE FROM members WHERE organization_id = ?",
			"DELETE FROM organizations WHERE id = ?",
		} {
			if _, err := r.exec(ctx, q, id); err != nil {
				return err
			}
		}
		ended = endAll(envs, now)
		return nil
	})
	if err != nil {
		return nil, opError("delete organization", err)
	}
	return ended, nil
}

// nullable turns a nil *string into SQL NULL.
func nullable(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func scanString(row scanner) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}
