package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

const memberColumns = "organization_id, user_id, email, name, role, status, joined_at, last_active_at"

func scanMember(row scanner) (Member, error) {
	var m Member
	var joined, active int64
	err := row.Scan(&m.OrganizationID, &m.UserID, &m.Email, &m.Name, &m.Role, &m.Status, &joined, &active)
	m.JoinedAt = fromMicros(joined)
	m.LastActiveAt = fromMicros(active)
	return m, err
}

func checkRole(role string) error {
	if role != RoleAdmin && role != RoleMember {
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// insertMember inserts m; the caller counts it.
func insertMember(ctx context.Context, r runner, m Member) error {
	_, err := r.exec(ctx, "INSERT INTO members ("+memberColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		m.OrganizationID, m.UserID, m.Email, m.Name, m.Role, m.Status, micros(m.JoinedAt), micros(m.LastActiveAt))
	return err
}

// lockOrganization locks the organization's row for the transaction, or
// returns ErrOrganizationNotFound.
func (s *sqlStore) lockOrganization(ctx context.Context, r runner, id string) error {
	ok, err := exists(ctx, r, "SELECT 1 FROM organizations WHERE id = ?"+s.d.lockRow, id)
	if err == nil && !ok {
		err = ErrOrganizationNotFound
	}
	return err
}

func (s *sqlStore) GetMember(ctx context.Context, orgID, userID string) (Member, error) {
	r := s.read()
	m, err := scanMember(r.queryRow(ctx,
		"SELECT "+memberColumns+" FROM members WHERE organization_id = ? AND user_id = ?", orgID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		err = orgMissing(ctx, r, orgID, ErrMemberNotFound)
	}
	return m, opError("get member", err)
}

func (s *sqlStore) ListMembers(ctx context.Context, orgID string, page Page) ([]Member, string, error) {
	after, err := decodeToken(page.Token)
	if err != nil {
		return nil, "", err
	}
	size := pageSize(page)
	r := s.read()
	list, err := queryAll(ctx, r, scanMember, "SELECT "+memberColumns+
		" FROM members WHERE organization_id = ? AND user_id > ? ORDER BY user_id LIMIT ?", orgID, after, size+1)
	if err == nil && len(list) == 0 {
		err = orgMissing(ctx, r, orgID, nil)
	}
	if err != nil {
		return nil, "", opError("list members", err)
	}
	list, next := paginate(list, size, func(m Member) string { return m.UserID })
	return list, next, nil
}

const invitationColumns = "id, organization_id, email, role, status, invited_at, expires_at"

func scanInvitation(row scanner) (Invitation, error) {
	var inv Invitation
	var invited, expires int64
	err := row.Scan(&inv.ID, &inv.OrganizationID, &inv.Email, &inv.Role, &inv.Status, &invited, &expires)
	inv.InvitedAt = fromMicros(invited)
	inv.ExpiresAt = fromMicros(expires)
	return inv, err
}

func (s *sqlStore) ListInvitations(ctx context.Context, orgID string, now time.Time, limit int) ([]Invitation, error) {
	r := s.read()
	var list []Invitation
	var err error
	if limit > 0 {
		list, err = queryAll(ctx, r, scanInvitation, "SELECT "+invitationColumns+
			" FROM invitations WHERE organization_id = ? AND expires_at > ? ORDER BY invited_at, id LIMIT ?",
			orgID, micros(now), limit)
	}
	if err == nil && len(list) == 0 {
		err = orgMissing(ctx, r, orgID, nil)
	}
	if err != nil {
		return nil, opError("list invitations", err)
	}
	return list, nil
}

func (s *sqlStore) Invite(ctx context.Context, inv Invitation) (Invitation, error) {
	if err := checkRole(inv.Role); err != nil {
		return Invitation{}, opError("invite", err)
	}
	id, err := orNewID(inv.ID, "inv_")
	if err != nil {
		return Invitation{}, opError("invite", err)
	}
	inv.ID = id
	inv.Email = strings.ToLower(inv.Email)
	inv.Status = InvitationPending
	var out Invitation
	err = s.inTx(ctx, func(r runner) error {
		if err := s.lockOrganization(ctx, r, inv.OrganizationID); err != nil {
			return err
		}
		member, err := exists(ctx, r,
			"SELECT 1 FROM members WHERE organization_id = ? AND lower(email) = ?", inv.OrganizationID, inv.Email)
		if err != nil {
			return err
		}
		if member {
			return ErrAlreadyMember
		}
		// A pending invitation for the address is renewed and keeps its ID.
		out, err = scanInvitation(r.queryRow(ctx, "INSERT INTO invitations ("+invitationColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (organization_id, email) DO UPDATE SET
				role = excluded.role,
				status = excluded.status,
				invited_at = excluded.invited_at,
				expires_at = excluded.expires_at
			RETURNING `+invitationColumns,
			inv.ID, inv.OrganizationID, inv.Email, inv.Role, inv.Status, micros(inv.InvitedAt), micros(inv.ExpiresAt)))
		return err
	})
	if err != nil {
		return Invitation{}, opError("invite", err)
	}
	return out, nil
}

func checkStatus(status string) error {
	if status != MemberActive && status != MemberSuspended {
		return fmt.Errorf("unknown member status %q", status)
	}
	return nil
}

// activeAdmins is how much a member adds to admin_count: 1 for an active
// admin, 0 otherwise. A suspended admin holds the role but cannot use it, so
// it does not keep an organization administered.
func activeAdmins(role, status string) int {
	if role == RoleAdmin && status == MemberActive {
		return 1
	}
	return 0
}

func (s *sqlStore) UpdateMember(ctx context.Context, orgID, userID string, u MemberUpdate) (Member, error) {
	if u.Role != "" {
		if err := checkRole(u.Role); err != nil {
			return Member{}, opError("update member", err)
		}
	}
	if u.Status != "" {
		if err := checkStatus(u.Status); err != nil {
			return Member{}, opError("update member", err)
		}
	}
	var out Member
	err := s.inTx(ctx, func(r runner) error {
		m, err := s.lockedMember(ctx, r, orgID, userID)
		if err != nil {
			return err
		}
		next := m
		if u.Role != "" {
			next.Role = u.Role
		}
		if u.Status != "" {
			next.Status = u.Status
		}
		if next.Role == m.Role && next.Status == m.Status {
			out = m
			return nil
		}
		delta := activeAdmins(next.Role, next.Status) - activeAdmins(m.Role, m.Status)
		if err := s.countAdmins(ctx, r, orgID, delta); err != nil {
			return err
		}
		if _, err := r.exec(ctx, "UPDATE members SET role = ?, status = ? WHERE organization_id = ? AND user_id = ?",
			next.Role, next.Status, orgID, userID); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return Member{}, opError("update member", err)
	}
	return out, nil
}

func (s *sqlStore) RemoveMember(ctx context.Context, orgID, userID string) error {
	err := s.inTx(ctx, func(r runner) error {
		m, err := s.lockedMember(ctx, r, orgID, userID)
		if err != nil {
			return err
		}
		if err := s.countAdmins(ctx, r, orgID, -activeAdmins(m.Role, m.Status)); err != nil {
			return err
		}
		if _, err := r.exec(ctx, "UPDATE organizations SET member_count = member_count - 1 WHERE id = ?", orgID); err != nil {
			return err
		}
		_, err = r.exec(ctx, "DELETE FROM members WHERE organization_id = ? AND user_id = ?", orgID, userID)
		return err
	})
	return opError("remove member", err)
}

// lockedMember locks the organization and returns the member.
func (s *sqlStore) lockedMember(ctx context.Context, r runner, orgID, userID string) (Member, error) {
	if err := s.lockOrganization(ctx, r, orgID); err != nil {
		return Member{}, err
	}
	m, err := scanMember(r.queryRow(ctx,
		"SELECT "+memberColumns+" FROM members WHERE organization_id = ? AND user_id = ?", orgID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return Member{}, ErrMemberNotFound
	}
	return m, err
}

// countAdmins adds delta to the organization's admin_count, its number of
// active admins. Taking away an active admin fails with ErrLastAdmin unless another remains: the condition is in
// the UPDATE itself, so it holds against concurrent changes even without the
// organization's lock.
func (s *sqlStore) countAdmins(ctx context.Context, r runner, orgID string, delta int) error {
	switch {
	case delta > 0:
		_, err := r.exec(ctx, "UPDATE organizations SET admin_count = admin_count + ? WHERE id = ?", delta, orgID)
		return err
	case delta < 0:
		ok, err := r.execOne(ctx,
			"UPDATE organizations SET admin_count = admin_count - ? WHERE id = ? AND admin_count > ?",
			-delta, orgID, -delta)
		if err == nil && !ok {
			err = ErrLastAdmin
		}
		return err
	}
	return nil
}

func (s *sqlStore) AcceptInvitations(ctx context.Context, p Person, now time.Time) (int, error) {
	if p.Email == "" {
		return 0, nil
	}
	if p.UserID == "" {
		return 0, opError("accept invitations", errors.New("person has no user ID"))
	}
	email := strings.ToLower(p.Email)
	// Most calls find nothing: look before opening a write transaction.
	r := s.read()
	pending, err := exists(ctx, r, "SELECT 1 FROM invitations WHERE email = ? AND expires_at > ?", email, micros(now))
	if err != nil || !pending {
		return 0, opError("accept invitations", err)
	}
	created := 0
	err = s.inTx(ctx, func(r runner) error {
		created = 0
		invs, err := queryAll(ctx, r, scanInvitation, "SELECT "+invitationColumns+
			" FROM invitations WHERE email = ? AND expires_at > ? ORDER BY organization_id", email, micros(now))
		if err != nil {
			return err
		}
		// One organization at a time, in ID order, like every other writer.
		for _, inv := range invs {
			if err := s.lockOrganization(ctx, r, inv.OrganizationID); errors.Is(err, ErrOrganizationNotFound) {
				continue // deleted meanwhile, with its invitations
			} else if err != nil {
				return err
			}
			if ok, err := r.execOne(ctx, "DELETE FROM invitations WHERE id = ? AND expires_at > ?",
				inv.ID, micros(now)); err != nil {
				return err
			} else if !ok {
				continue // accepted by a concurrent call
			}
			ok, err := r.execOne(ctx, "INSERT INTO members ("+memberColumns+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (organization_id, user_id) DO NOTHING`,
				inv.OrganizationID, p.UserID, p.Email, p.Name, inv.Role, MemberActive, micros(now), micros(now))
			if err != nil {
				return err
			}
			if !ok {
				continue // already a member: the invitation is simply used up
			}
			if _, err := r.exec(ctx, `UPDATE organizations SET
					member_count = member_count + 1,
					admin_count = admin_count + ?
				WHERE id = ?`, activeAdmins(inv.Role, MemberActive), inv.OrganizationID); err != nil {
				return err
			}
			created++
		}
		return nil
	})
	if err != nil {
		return 0, opError("accept invitations", err)
	}
	return created, nil
}

func (s *sqlStore) TouchMember(ctx context.Context, userID string, now time.Time) error {
	_, err := s.read().exec(ctx, "UPDATE members SET last_active_at = ? WHERE user_id = ? AND status = ?",
		micros(now), userID, MemberActive)
	return opError("touch member", err)
}
