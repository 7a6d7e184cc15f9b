package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

const environmentColumns = "id, project_id, organization_id, name, blueprint_id, status, created_at, ready_at, created_by"

func scanEnvironment(row scanner) (Environment, error) {
	var e Environment
	var created, ready int64
	var by sql.NullString
	err := row.Scan(&e.ID, &e.ProjectID, &e.OrganizationID, &e.Name, &e.BlueprintID, &e.Status, &created, &ready, &by)
	e.CreatedAt = fromMicros(created)
	e.ReadyAt = fromMicros(ready)
	e.CreatedBy = by.String
	return e, err
}

// creator is how CreatedBy is stored: NULL when unknown.
func creator(by string) sql.NullString { return sql.NullString{String: by, Valid: by != ""} }

// endAll returns envs as ended at now.
func endAll(envs []Environment, now time.Time) []Environment {
	for i := range envs {
		envs[i].Status = EnvironmentDeleted
		envs[i].DeletedAt = fromMicros(micros(now))
	}
	return envs
}

// CreateEnvironment stores e with status PROVISIONING in the organization of
// its project. An empty BlueprintID counts as no blueprint.
func (s *sqlStore) CreateEnvironment(ctx context.Context, e Environment) (Environment, error) {
	id, err := orNewID(e.ID, "env_")
	if err != nil {
		return Environment{}, opError("create environment", err)
	}
	e.ID = id
	e.Status = EnvironmentProvisioning
	e.DeletedAt = time.Time{}
	err = s.inTx(ctx, func(r runner) error {
		// Counting first also locks the project and finds it missing.
		err := r.queryRow(ctx, `UPDATE projects SET environment_count = environment_count + 1
			WHERE id = ? RETURNING organization_id`, e.ProjectID).Scan(&e.OrganizationID)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrProjectNotFound
		}
		if err != nil {
			return err
		}
		_, err = r.exec(ctx, "INSERT INTO environments ("+environmentColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			e.ID, e.ProjectID, e.OrganizationID, e.Name, e.BlueprintID, e.Status, micros(e.CreatedAt), micros(e.ReadyAt), creator(e.CreatedBy))
		if s.d.uniqueViolation(err, environmentNameKey) {
			return ErrEnvironmentNameTaken
		}
		if err != nil || e.BlueprintID == "" {
			return err
		}
		var n int
		if err := r.queryRow(ctx, `INSERT INTO project_blueprints (project_id, blueprint_id, n) VALUES (?, ?, 1)
			ON CONFLICT (project_id, blueprint_id) DO UPDATE SET n = project_blueprints.n + 1
			RETURNING n`, e.ProjectID, e.BlueprintID).Scan(&n); err != nil {
			return err
		}
		if n == 1 {
			_, err = r.exec(ctx, "UPDATE projects SET blueprint_count = blueprint_count + 1 WHERE id = ?", e.ProjectID)
		}
		return err
	})
	if err != nil {
		return Environment{}, opError("create environment", err)
	}
	e.CreatedAt = fromMicros(micros(e.CreatedAt))
	e.ReadyAt = fromMicros(micros(e.ReadyAt))
	return e, nil
}

func (s *sqlStore) GetEnvironment(ctx context.Context, id string) (Environment, error) {
	e, err := scanEnvironment(s.read().queryRow(ctx,
		"SELECT "+environmentColumns+" FROM environments WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Environment{}, ErrEnvironmentNotFound
	}
	return e, opError("get environment", err)
}

func (s *sqlStore) ListEnvironments(ctx context.Context, f EnvironmentFilter, page Page) ([]Environment, string, error) {
	after, err := decodeToken(page.Token)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(page)
	where := []string{"id > ?"}
	args := []any{after}
	if f.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, f.ProjectID)
	}
	if f.MemberOf != "" {
		where = append(where, "organization_id IN (SELECT organization_id FROM members WHERE user_id = ? AND status = ?)")
		args = append(args, f.MemberOf, MemberActive)
	}
	args = append(args, size+1)
	r := s.read()
	list, err := queryAll(ctx, r, scanEnvironment, "SELECT "+environmentColumns+" FROM environments WHERE "+
		strings.Join(where, " AND ")+" ORDER BY id LIMIT ?", args...)
	if err == nil && len(list) == 0 && f.ProjectID != "" {
		var ok bool
		if ok, err = exists(ctx, r, "SELECT 1 FROM projects WHERE id = ?", f.ProjectID); err == nil && !ok {
			err = ErrProjectNotFound
		}
	}
	if err != nil {
		return nil, "", opError("list environments", err)
	}
	list, next := paginate(list, size, func(e Environment) string { return e.ID })
	return list, next, nil
}

func (s *sqlStore) DeleteEnvironment(ctx context.Context, id string, now time.Time) (Environment, error) {
	var projectID string
	err := s.read().queryRow(ctx, "SELECT project_id FROM environments WHERE id = ?", id).Scan(&projectID)
	if errors.Is(err, sql.ErrNoRows) {
		return Environment{}, ErrEnvironmentNotFound
	}
	if err != nil {
		return Environment{}, opError("delete environment", err)
	}
	var ended Environment
	err = s.inTx(ctx, func(r runner) error {
		// Project first, then environment: the order every writer takes.
		if ok, err := exists(ctx, r, "SELECT 1 FROM projects WHERE id = ?"+s.d.lockRow, projectID); err != nil {
			return err
		} else if !ok {
			return ErrEnvironmentNotFound // deleted with its project meanwhile
		}
		e, err := scanEnvironment(r.queryRow(ctx,
			"DELETE FROM environments WHERE id = ? RETURNING "+environmentColumns, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrEnvironmentNotFound // deleted meanwhile
		}
		if err != nil {
			return err
		}
		blueprints, err := releaseBlueprint(ctx, r, e.ProjectID, e.BlueprintID)
		if err != nil {
			return err
		}
		if _, err := r.exec(ctx, `UPDATE projects SET
				environment_count = environment_count - 1,
				blueprint_count = blueprint_count - ?
			WHERE id = ?`, blueprints, e.ProjectID); err != nil {
			return err
		}
		ended = endAll([]Environment{e}, now)[0]
		return nil
	})
	if err != nil {
		return Environment{}, opError("delete environment", err)
	}
	return ended, nil
}

// releaseBlueprint drops one use of blueprintID by the project and returns
// 1 if it was the last, to be taken off the project's blueprint_count, else 0.
func releaseBlueprint(ctx context.Context, r runner, projectID, blueprintID string) (int, error) {
	if blueprintID == "" {
		return 0, nil
	}
	last, err := r.execOne(ctx, "DELETE FROM project_blueprints WHERE project_id = ? AND blueprint_id = ? AND n = 1",
		projectID, blueprintID)
	if err != nil || last {
		return 1, err
	}
	_, err = r.exec(ctx, "UPDATE project_blueprints SET n = n - 1 WHERE project_id = ? AND blueprint_id = ?",
		projectID, blueprintID)
	return 0, err
}

// MaxExistingIDs bounds the ids one ExistingEnvironments call takes.
const MaxExistingIDs = 1000

func (s *sqlStore) ExistingEnvironments(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > MaxExistingIDs {
		return nil, fmt.Errorf("existing environments: %d ids, at most %d", len(ids), MaxExistingIDs)
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	found, err := queryAll(ctx, s.read(), scanString, "SELECT id FROM environments WHERE id IN ("+marks+")", args...)
	return found, opError("existing environments", err)
}

// EnvironmentsByCreator lists live environments by their creator
// (CreatedBy): creator's alone, or, with creator empty, every environment
// that has one, in order of creator then id. Environments without a
// recorded creator are never listed. The page token holds the last
// environment's id and creator.
func (s *sqlStore) EnvironmentsByCreator(ctx context.Context, creator string, page Page) ([]Environment, string, error) {
	var afterID, afterBy string
	if page.Token != "" {
		key, err := decodeToken(page.Token)
		if err != nil {
			return nil, "", err
		}
		var ok bool
		// Ids hold no space; a creator may.
		if afterID, afterBy, ok = strings.Cut(key, " "); !ok || afterID == "" || afterBy == "" {
			return nil, "", ErrInvalidPageToken
		}
	}
	size := pageSize(page)
	where, args := "created_by IS NOT NULL", []any{}
	switch {
	case creator != "":
		where, args = "created_by = ? AND id > ?", []any{creator, afterID}
	case page.Token != "":
		where, args = "(created_by, id) > (?, ?)", []any{afterBy, afterID}
	}
	args = append(args, size+1)
	list, err := queryAll(ctx, s.read(), scanEnvironment, "SELECT "+environmentColumns+" FROM environments WHERE "+
		where+" ORDER BY created_by, id LIMIT ?", args...)
	if err != nil {
		return nil, "", opError("environments by creator", err)
	}
	list, next := paginate(list, size, func(e Environment) string { return e.ID + " " + e.CreatedBy })
	return list, next, nil
}
