package orgsvc

import (
	"net/mail"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/orgedge/edge/orgsvc/store"
)

// Bounds on request fields (docs/api.md).
const (
	maxDisplayName  = 200
	maxDescription  = 2000
	maxEmail        = 254
	maxID           = 128
	defaultPageSize = 50
	maxPageSize     = 1000
	maxPageToken    = 512
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (v *fieldViolations) name(field, s string) {
	switch {
	case s == "":
		v.add(field, "is required")
	case !dnsLabel.MatchString(s):
		v.add(field, "must be a DNS label: 1-63 of a-z, 0-9 and '-', neither starting nor ending with '-'")
	}
}

func (v *fieldViolations) text(field, s string, max int) {
	if n := utf8.RuneCountInString(s); n > max {
		v.add(field, "must be at most %d characters, got %d", max, n)
	}
}

func (v *fieldViolations) email(field, s string) {
	if s == "" {
		v.add(field, "is required")
		return
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || len(s) > maxEmail || !strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".") {
		v.add(field, "must be an e-mail address such as name@example.com")
	}
}

func (v *fieldViolations) id(field, s string) {
	switch {
	case s == "":
		v.add(field, "is required")
	case len(s) > maxID:
		v.add(field, "must be at most %d bytes", maxID)
	}
}

func (v *fieldViolations) role(field, s string) {
	if s != store.RoleAdmin && s != store.RoleMember {
		v.add(field, "must be %q or %q", store.RoleAdmin, store.RoleMember)
	}
}

func (v *fieldViolations) status(field, s string) {
	if s != store.MemberActive && s != store.MemberSuspended {
		v.add(field, "must be %q or %q", store.MemberActive, store.MemberSuspended)
	}
}

// page validates page_size and page_token and returns the store's page.
func (v *fieldViolations) page(size int32, token string) store.Page {
	switch {
	case size < 0 || size > maxPageSize:
		v.add("page_size", "must be between 0 and %d", maxPageSize)
	case size == 0:
		size = defaultPageSize
	}
	if len(token) > maxPageToken {
		v.add("page_token", "must be at most %d bytes", maxPageToken)
	}
	return store.Page{Size: int(size), Token: token}
}
