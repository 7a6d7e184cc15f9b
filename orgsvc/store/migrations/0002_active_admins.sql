-- admin_count counts active admins only: a suspended admin cannot act, so it
-- does not keep an organization administered (the last-admin rule). Recount
-- it, for memberships suspended in storage before this rule.
UPDATE organizations SET admin_count = (
    SELECT count(*) FROM members m
    WHERE m.organization_id = organizations.id AND m.role = 'admin' AND m.status = 'active'
);
