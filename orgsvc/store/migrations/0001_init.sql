-- Portable SQL: the same file runs on SQLite and PostgreSQL. Times are Unix
-- microseconds (UTC), 0 for none. Constraint names are fixed because the Go
-- code recognizes its unique-key violations by them (dialect.go).

CREATE TABLE organizations (
    id            TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    display_name  TEXT    NOT NULL,
    billing_email TEXT    NOT NULL,
    plan          TEXT    NOT NULL,
    -- Counters, kept in the transaction of every change they count.
    project_count INTEGER NOT NULL DEFAULT 0,
    member_count  INTEGER NOT NULL DEFAULT 0,
    admin_count   INTEGER NOT NULL DEFAULT 0,
    created_at    BIGINT  NOT NULL,
    CONSTRAINT organizations_pkey PRIMARY KEY (id),
    CONSTRAINT organizations_name_key UNIQUE (name),
    CONSTRAINT organizations_counts_check CHECK (
        project_count >= 0 AND member_count >= 0
        AND admin_count >= 0 AND admin_count <= member_count)
);

CREATE TABLE projects (
    id                TEXT    NOT NULL,
    organization_id   TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    description       TEXT    NOT NULL,
    environment_count INTEGER NOT NULL DEFAULT 0,
    blueprint_count   INTEGER NOT NULL DEFAULT 0,
    created_at        BIGINT  NOT NULL,
    CONSTRAINT projects_pkey PRIMARY KEY (id),
    CONSTRAINT projects_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT projects_organization_id_name_key UNIQUE (organization_id, name),
    CONSTRAINT projects_counts_check CHECK (
        environment_count >= 0 AND blueprint_count >= 0
        AND blueprint_count <= environment_count)
);
CREATE INDEX projects_organization_id_id_idx ON projects (organization_id, id);

CREATE TABLE members (
    organization_id TEXT   NOT NULL,
    user_id         TEXT   NOT NULL,
    email           TEXT   NOT NULL,
    name            TEXT   NOT NULL,
    role            TEXT   NOT NULL,
    status          TEXT   NOT NULL,
    joined_at       BIGINT NOT NULL,
    last_active_at  BIGINT NOT NULL,
    CONSTRAINT members_pkey PRIMARY KEY (organization_id, user_id),
    CONSTRAINT members_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT members_role_check CHECK (role IN ('admin', 'member'))
);
CREATE INDEX members_user_id_idx ON members (user_id, organization_id);

-- Only pending invitations are kept: an accepted one is deleted, a renewed
-- one updated in place. email is stored lowercased.
CREATE TABLE invitations (
    id              TEXT   NOT NULL,
    organization_id TEXT   NOT NULL,
    email           TEXT   NOT NULL,
    role            TEXT   NOT NULL,
    status          TEXT   NOT NULL,
    invited_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    CONSTRAINT invitations_pkey PRIMARY KEY (id),
    CONSTRAINT invitations_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT invitations_organization_id_email_key UNIQUE (organization_id, email),
    CONSTRAINT invitations_role_check CHECK (role IN ('admin', 'member'))
);
CREATE INDEX invitations_email_idx ON invitations (email, expires_at);

-- Only live environments are kept: a deleted one is removed.
-- organization_id repeats the project's, for listing by membership.
CREATE TABLE environments (
    id              TEXT   NOT NULL,
    project_id      TEXT   NOT NULL,
    organization_id TEXT   NOT NULL,
    name            TEXT   NOT NULL,
    blueprint_id    TEXT   NOT NULL,
    status          TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    ready_at        BIGINT NOT NULL,
    CONSTRAINT environments_pkey PRIMARY KEY (id),
    CONSTRAINT environments_project_id_fkey FOREIGN KEY (project_id) REFERENCES projects (id),
    CONSTRAINT environments_organization_id_fkey FOREIGN KEY (organization_id) REFERENCES organizations (id),
    CONSTRAINT environments_project_id_name_key UNIQUE (project_id, name)
);
CREATE INDEX environments_project_id_id_idx ON environments (project_id, id);
CREATE INDEX environments_organization_id_id_idx ON environments (organization_id, id);

-- How many live environments of a project use each blueprint; a project's
-- blueprint_count is the number of its rows here.
CREATE TABLE project_blueprints (
    project_id   TEXT    NOT NULL,
    blueprint_id TEXT    NOT NULL,
    n            INTEGER NOT NULL,
    CONSTRAINT project_blueprints_pkey PRIMARY KEY (project_id, blueprint_id),
    CONSTRAINT project_blueprints_project_id_fkey FOREIGN KEY (project_id) REFERENCES projects (id),
    CONSTRAINT project_blueprints_n_check CHECK (n > 0)
);
