-- created_by is the subject (the verified token's sub) that created the
-- environment: the edge counts environment quotas per subject, and its
-- reconciliation asks the backend for each subject's environments.
-- Environments created before this column existed have none (NULL): no
-- backfill, since nothing recorded who created them; they stay counted only
-- by what the edge recorded when they were created.
ALTER TABLE environments ADD COLUMN created_by TEXT;
CREATE INDEX environments_created_by_id_idx ON environments (created_by, id);
