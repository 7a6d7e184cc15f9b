// Package backendapi is the private contract between the edge and its
// backend (orgsvc): the names both sides must agree on that are not part of
// the public API. Each is declared here once, so that the two cannot drift.
//
// It is not the API: clients never see these headers (the edge removes
// them from every answer) and the path is served only on the backend's
// admin listener, which must stay inside the cluster.
package backendapi

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
