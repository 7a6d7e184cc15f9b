package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

const projectColumns = "id, organization_id, name, description, environment_count, blueprint_count, created_at"

func scanProject(row scanner) (Project, error) {
	var p Project
	var created int64
	err := row.Scan(&p.ID, &p.OrganizationID, &p.Name, &p.Description,
		&p.EnvironmentCount, &p.BlueprintCount, &created)
	p.CreatedAt = fromMicros(created)
	return p, err
}

func (s *sqlStore) CreateProject(ctx context.Context, p Project) (Project, error) {
	id, err := orNewID(p.ID, "prj_")
	if err != nil {
		return Project{}, opError("create project", err)
	}
	p.ID = id
	p.EnvironmentCount = 0
	p.BlueprintCount = 0
	err = s.inTx(ctx, func(r runner) error {
		// Counting first also locks the organization and finds it missing.
		if ok, err := r.execOne(ctx,
			"UPDATE organizations SET project_count = project_count + 1 WHERE id = ?", p.OrganizationID); err != nil {
			return err
		} else if !ok {
			return ErrOrganizationNotFound
		}
		_, err := r.exec(ctx, `INSERT INTO projects
			(id, organization_id, name, description, environment_count, blueprint_count, created_at)
			VALUES (?, ?, ?, ?, 0, 0, ?)`,
			p.ID, p.OrganizationID, p.Name, p.Description, micros(p.CreatedAt))
		if s.d.uniqueViolation(err, projectNameKey) {
			return ErrProjectNameTaken
		}
		return err
	})
	if err != nil {
		return Project{}, opError("create project", err)
	}
	p.CreatedAt = fromMicros(micros(p.CreatedAt))
	return p, nil
}

func (s *sqlStore) GetProject(ctx context.Context, id string) (Project, error) {
	p, err := scanProject(s.read().queryRow(ctx, "SELECT "+projectColumns+" FROM projects WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Project{}, ErrProjectNotFound
	}
	return p, opError("get project", err)
}

func (s *sqlStore) ListProjects(ctx context.Context, orgID string, page Page) ([]Project, string, error) {
	after, err := decodeToken(page.Token)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(page)
	r := s.read()
	list, err := queryAll(ctx, r, scanProject, "SELECT "+projectColumns+
		" FROM projects WHERE organization_id = ? AND id > ? ORDER BY id LIMIT ?", orgID, after, size+1)
	if err == nil && len(list) == 0 {
		err = orgMissing(ctx, r, orgID, nil)
	}
	if err != nil {
		return nil, "", opError("list projects", err)
	}
	list, next := paginate(list, size, func(p Project) string { return p.ID })
	return list, next, nil
}

func (s *sqlStore) UpdateProject(ctx context.Context, id string, name, description *string) (Project, error) {
	p, err := scanProject(s.read().queryRow(ctx, `UPDATE projects SET
			name = COALESCE(?, name),
			description = COALESCE(?, description)
		WHERE id = ? RETURNING `+projectColumns,
		nullable(name), nullable(description), id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Project{}, ErrProjectNotFound
	case s.d.uniqueViolation(err, projectNameKey):
		return Project{}, ErrProjectNameTaken
	}
	return p, opError("update project", err)
}

func (s *sqlStore) DeleteProject(ctx context.Context, id string, force bool, now time.Time) ([]Environment, error) {
	var orgID string
	err := s.read().queryRow(ctx, "SELECT organization_id FROM projects WHERE id = ?", id).Scan(&orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrProjectNotFound
	}
	if err != nil {
		return nil, opError("delete project", err)
	}
	var ended []Environment
	err = s.inTx(ctx, func(r runner) error {
		// Organization first, then project: the order every writer takes.
		if ok, err := r.execOne(ctx,
			"UPDATE organizations SET project_count = project_count - 1 WHERE id = ?", orgID); err != nil {
			return err
		} else if !ok {
			return ErrProjectNotFound // deleted with its organization meanwhile
		}
		if ok, err := exists(ctx, r, "SELECT 1 FROM projects WHERE id = ?"+s.d.lockRow, id); err != nil {
			return err
		} else if !ok {
			return ErrProjectNotFound // deleted meanwhile
		}
		envs, err := queryAll(ctx, r, scanEnvironment,
			"SELECT "+environmentColumns+" FROM environments WHERE project_id = ? ORDER BY id", id)
		if err != nil {
			return err
		}
		if len(envs) > 0 && !force {
			return ErrProjectHasEnvironments
		}
		for _, q := range []string{
			"DELETE FROM environments WHERE project_id = ?",
			"DELETE FROM project_blueprints WHERE project_id = ?",
			"DELETE FROM projects WHERE id = ?",
		} {
			if _, err := r.exec(ctx, q, id); err != nil {
				return err
			}
		}
		ended = endAll(envs, now)
		return nil
	})
	if err != nil {
		return nil, opError("delete project", err)
	}
	return ended, nil
}
