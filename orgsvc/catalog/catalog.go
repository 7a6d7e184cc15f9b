package catalog

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Blueprint is a template for environments.
type Blueprint struct {
	// ID is a DNS label, unique in its catalog; environments refer to it.
	ID          string
	Name        string
	Description string
	Tags        []string
	// Size of one environment made from the blueprint.
	VCPUs    int32
	MemoryGB int32
}

// clone returns b with its own copy of Tags, so callers cannot change the catalog.
func (b Blueprint) clone() Blueprint {
	b.Tags = slices.Clone(b.Tags)
	return b
}

// Catalog is a fixed set of blueprints. It is safe for concurrent use; every
// Blueprint it returns is a copy the caller may change.
type Catalog struct {
	blueprints []Blueprint // sorted by ID
	byID       map[string]int
	// words[i] holds the lower-cased id, name, description and tags of
	// blueprints[i], the fields a search looks in.
	words [][]string
}

// New returns a catalog of the given blueprints. It fails if an id is not a
// DNS label or is used twice, or a size is not positive.
func New(blueprints ...Blueprint) (*Catalog, error) {
	c := &Catalog{byID: make(map[string]int, len(blueprints))}
	for _, b := range blueprints {
		if !isDNSLabel(b.ID) {
			return nil, fmt.Errorf("blueprint id %q: not a DNS label", b.ID)
		}
		if _, dup := c.byID[b.ID]; dup {
			return nil, fmt.Errorf("blueprint id %q: used twice", b.ID)
		}
		if b.VCPUs <= 0 || b.MemoryGB <= 0 {
			return nil, fmt.Errorf("blueprint %q: vcpus and memory_gb must be positive", b.ID)
		}
		c.byID[b.ID] = 0
		c.blueprints = append(c.blueprints, b.clone())
	}
	slices.SortFunc(c.blueprints, func(a, b Blueprint) int { return cmp.Compare(a.ID, b.ID) })
	c.words = make([][]string, len(c.blueprints))
	for i, b := range c.blueprints {
		c.byID[b.ID] = i
		w := []string{strings.ToLower(b.ID), strings.ToLower(b.Name), strings.ToLower(b.Description)}
		for _, t := range b.Tags {
			w = append(w, strings.ToLower(t))
		}
		c.words[i] = w
	}
	return c, nil
}

// Lookup returns the blueprint with the given id, and whether there is one.
// Ids are case-sensitive.
func (c *Catalog) Lookup(id string) (Blueprint, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Blueprint{}, false
	}
	return c.blueprints[i].clone(), true
}

// Search returns the blueprints that match query, sorted by id. The query is
// split into words at white space; a blueprint matches when every word is,
// ignoring case, part of its id, name, description or one of its tags. An
// empty query matches every blueprint. The result is nil when nothing matches.
func (c *Catalog) Search(query string) []Blueprint {
	words := strings.Fields(strings.ToLower(query))
	var out []Blueprint
	for i, b := range c.blueprints {
		if matchesAll(c.words[i], words) {
			out = append(out, b.clone())
		}
	}
	return out
}

func matchesAll(fields, words []string) bool {
	for _, w := range words {
		if !slices.ContainsFunc(fields, func(f string) bool { return strings.Contains(f, w) }) {
			return false
		}
	}
	return true
}

// Builtin returns the catalog the service ships with.
func Builtin() *Catalog { return builtin() }

var builtin = sync.OnceValue(func() *Catalog {
	c, err := New(builtinBlueprints...)
	if err != nil {
		// builtinBlueprints is source code, not input, and a test covers it.
		panic("catalog: built-in catalog: " + err.Error())
	}
	return c
})

// isDNSLabel reports whether s is 1 to 63 characters of a-z, 0-9 and '-',
// neither starting nor ending with '-'.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
