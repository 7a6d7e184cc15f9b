// Package backendapi is the private contract between the edge and its
// backend (orgsvc): the names both sides must agree on that are not part of
// the public API. Each is declared here once, so that the two cannot drift.
//
// It is not the API: clients never see these headers (the edge removes
// them from every answer) and the paths are served only on the backend's
// admin listener, which must stay inside the cluster.
package backendapi

import "time"

// Headers by which a forced DeleteProject or DeleteOrganization tells the
// edge which environments it ended, so that their quota slots come back at
// once: the ids, comma-separated (at most MaxEndedListed), and, when more
// ended than are listed, EndedMoreHeader (the edge then reconciles at
// once).
const (
	EndedHeader     = "Orgsvc-Ended-Environments"
	EndedMoreHeader = "Orgsvc-Ended-Environments-More"
	MaxEndedListed  = 1000
)

// ExistingEnvironmentsPath is the backend's internal, read-only endpoint by
// which the edge reconciles its environment quota records with the
// backend, the source of truth. POST {"ids": [...]} answers
// {"existing": [...]}: which of the ids are live environments. It reveals
// nothing but the existence of ids the caller already knows.
const ExistingEnvironmentsPath = "/internal/v1/environments:existing"

// CreatedEnvironmentsPath is the backend's internal, read-only endpoint by
// which the edge's reconciliation learns of environments it holds no record
// of (created while Redis was down or full, whose confirmation was lost, or
// created around the edge): the live environments by creator, the verified
// subject the edge counts quotas by. POST a CreatedRequest, answered with a
// CreatedPage; follow Next until it is empty. Environments whose creator
// was never recorded are not listed.
const CreatedEnvironmentsPath = "/internal/v1/environments:byCreator"

// CreatedRequest asks for one page of CreatedEnvironmentsPath.
type CreatedRequest struct {
	// Subject, when set, lists that creator's environments alone, in order
	// of id; empty lists every creator's, in order of creator, then id.
	Subject string `json:"subject,omitempty"`
	// After is the previous page's Next; empty for the first page.
	After string `json:"after,omitempty"`
	// Limit is the page's size, 1 to MaxCreatedPage; 0 means MaxCreatedPage.
	Limit int `json:"limit,omitempty"`
}

// CreatedPage is one page of CreatedEnvironmentsPath.
type CreatedPage struct {
	Environments []CreatedEnvironment `json:"environments"`
	// Next is the After of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// CreatedEnvironment is one live environment and who created it. The edge
// counts it at its configured environment size, from CreatedAt.
type CreatedEnvironment struct {
	ID        string    `json:"id"`
	Subject   string    `json:"subject"`
	CreatedAt time.Time `json:"created_at"`
}

// Bounds of CreatedEnvironmentsPath: the most environments one page holds,
// and the largest request the backend reads.
const (
	MaxCreatedPage    = 1000
	MaxCreatedRequest = 16 << 10
)
