package catalog_test

import (
	"slices"
	"testing"

	"github.com/orgedge/edge/orgsvc/catalog"
)

func ids(bs []catalog.Blueprint) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func TestSearchMatchesEveryWordInIDNameDescriptionOrTags(t *testing.T) {
	c := catalog.Builtin()
	all := []string{
		"django-5", "elasticsearch-8", "go-api", "java-spring", "kafka-3",
		"node-20-web", "postgres-16", "python-ml-notebook", "redis-7", "static-site",
	}
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"empty query matches all, sorted by id", "", all},
		{"white space only matches all", " \t\n ", all},
		{"word in id, name or description", "postgres", []string{"django-5", "go-api", "postgres-16"}},
		{"word in a tag or a description", "cache", []string{"redis-7", "static-site"}},
		{"every word must match", "python web", []string{"django-5"}},
		{"words in different fields", "backend api", []string{"go-api", "java-spring"}},
		{"case does not matter", "PyThOn ML", []string{"python-ml-notebook"}},
		{"part of a word matches", "elastic", []string{"elasticsearch-8"}},
		{"extra white space between words", "  web\tfrontend  ", []string{"node-20-web", "static-site"}},
		{"exact id", "kafka-3", []string{"kafka-3"}},
		{"no match", "mongodb", nil},
		{"one word of several does not match", "python mongodb", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Search(tt.query)
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("Search(%q) = %v, want %v", tt.query, ids(got), tt.want)
			}
			if tt.want == nil && got != nil {
				t.Errorf("Search(%q) = %#v, want nil", tt.query, got)
			}
		})
	}
}

func TestBuiltinCatalogIsUsable(t *testing.T) {
	all := catalog.Builtin().Search("")
	if len(all) < 8 || len(all) > 12 {
		t.Errorf("built-in catalog has %d blueprints, want 8 to 12", len(all))
	}
	for _, b := range all {
		if b.Name == "" || b.Description == "" || len(b.Tags) == 0 {
			t.Errorf("blueprint %q lacks a name, description or tags: %+v", b.ID, b)
		}
		got, ok := catalog.Builtin().Lookup(b.ID)
		if !ok || got.ID != b.ID {
			t.Errorf("Lookup(%q) = %+v, %v", b.ID, got, ok)
		}
	}
}

func TestLookupUnknownIDIsNotFound(t *testing.T) {
	for _, id := range []string{"", "mongodb-7", "POSTGRES-16", "postgres-16 "} {
		if b, ok := catalog.Builtin().Lookup(id); ok {
			t.Errorf("Lookup(%q) = %+v, true; want not found", id, b)
		}
	}
}

func TestCallersCannotChangeTheCatalog(t *testing.T) {
	c := catalog.Builtin()
	b, _ := c.Lookup("redis-7")
	b.Tags[0] = "changed"
	b.Name = "changed"
	for _, r := range c.Search("redis") {
		r.Tags[0] = "changed"
	}
	again, _ := c.Lookup("redis-7")
	if again.Name == "changed" || slices.Contains(again.Tags, "changed") {
		t.Errorf("catalog changed through a returned blueprint: %+v", again)
	}
}

func TestNewRejectsBadBlueprints(t *testing.T) {
	ok := catalog.Blueprint{ID: "a", Name: "A", VCPUs: 1, MemoryGB: 1}
	with := func(f func(*catalog.Blueprint)) catalog.Blueprint {
		b := ok
		f(&b)
		return b
	}
	tests := []struct {
		name       string
		blueprints []catalog.Blueprint
	}{
		{"empty id", []catalog.Blueprint{with(func(b *catalog.Blueprint) { b.ID = "" })}},
		{"id not a DNS label", []catalog.Blueprint{with(func(b *catalog.Blueprint) { b.ID = "Postgres" })}},
		{"id used twice", []catalog.Blueprint{ok, ok}},
		{"no vcpus", []catalog.Blueprint{with(func(b *catalog.Blueprint) { b.VCPUs = 0 })}},
		{"negative memory", []catalog.Blueprint{with(func(b *catalog.Blueprint) { b.MemoryGB = -1 })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := catalog.New(tt.blueprints...); err == nil {
				t.Errorf("New(%+v) succeeded, want an error", tt.blueprints)
			}
		})
	}
}

func TestNewCatalogSortsAndCopies(t *testing.T) {
	tags := []string{"x"}
	c, err := catalog.New(
		catalog.Blueprint{ID: "b", Name: "B", Tags: tags, VCPUs: 1, MemoryGB: 1},
		catalog.Blueprint{ID: "a", Name: "A", VCPUs: 1, MemoryGB: 1},
	)
	if err != nil {
		t.Fatal(err)
	}
	tags[0] = "changed"
	if got := ids(c.Search("")); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Search(\"\") = %v, want [a b]", got)
	}
	if got := c.Search("x"); len(got) != 1 || got[0].Tags[0] != "x" {
		t.Errorf("Search(\"x\") = %+v, want blueprint b with its tag as given to New", got)
	}
}
