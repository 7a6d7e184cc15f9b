package catalog

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Violation is one problem found in a blueprint document.
type Violation struct {
	// Path is where in the document, as described in the package
	// documentation; empty for the document as a whole.
	Path    string
	Message string
}

// Limits of the blueprint document format and of [Validate].
const (
	MaxServices          = 50
	MaxDescriptionLength = 2000 // characters
	MaxVCPUs             = 64
	MaxMemoryGB          = 512
	// MaxViolations bounds what Validate returns, so that a large, broken
	// document does not make a large response.
	MaxViolations = 100
)

// Validate checks a blueprint document, YAML or JSON, against the format
// described in the package documentation and returns its violations, or nil
// if it has none.
//
// Violations are in document order (then by path and message), so the same
// content always gives the same result. A document that does not parse gives
// one violation, with an empty path and the parser's line number. At most
// [MaxViolations] are returned; when there were more, the last one says how
// many were left out.
//
// Validate reads content once and its work grows with len(content); it never
// panics. The caller bounds len(content).
func Validate(content string) []Violation {
	doc, err := parse(content)
	if err != nil {
		return []Violation{{Message: err.Error()}}
	}
	v := &validator{}
	v.document(doc)
	return v.result()
}

var errMultipleDocuments = errors.New("content holds more than one document; a blueprint is one document")

// parse returns the document's node, nil if content holds no document.
func parse(content string) (doc *yaml.Node, err error) {
	defer func() {
		// The parser reports errors by panicking and recovering; guard against
		// one it does not recover, since content comes from the network.
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("cannot parse document: %v", r)
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(content))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, parseError(err, content)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
		return &first, nil
	case err != nil:
		return nil, parseError(err, content)
	default:
		return nil, errMultipleDocuments
	}
}

// parseError keeps the parser's message, which says where ("yaml: line 3:
// did not find expected key"), without its package prefix. The parser leaves
// out the line when it is the first; say so when there is only one line, as
// in compact JSON.
func parseError(err error, content string) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if !strings.HasPrefix(msg, "line ") && !strings.Contains(strings.TrimRight(content, "\r\n"), "\n") {
		msg = "line 1: " + msg
	}
	return errors.New("cannot parse document: " + msg)
}

// validator collects the violations of one document.
type validator struct {
	found []found
}

// found is a violation with the position of the node it is about, for sorting.
type found struct {
	line, column int
	Violation
}

func (v *validator) add(n *yaml.Node, path, format string, args ...any) {
	f := found{Violation: Violation{Path: path, Message: fmt.Sprintf(format, args...)}}
	if n != nil {
		f.line, f.column = n.Line, n.Column
	}
	v.found = append(v.found, f)
}

func (v *validator) result() []Violation {
	if len(v.found) == 0 {
		return nil
	}
	slices.SortFunc(v.found, func(a, b found) int {
		return cmp.Or(
			cmp.Compare(a.line, b.line),
			cmp.Compare(a.column, b.column),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Message, b.Message),
		)
	})
	out := make([]Violation, 0, min(len(v.found), MaxViolations))
	for _, f := range v.found {
		if len(out) == MaxViolations-1 && len(v.found) > MaxViolations {
			out = append(out, Violation{
				Message: fmt.Sprintf("too many violations: %d more not shown", len(v.found)-len(out)),
			})
			break
		}
		out = append(out, f.Violation)
	}
	return out
}

// service is what the dependency checks need to know of a service.
type service struct {
	name string
	deps []dependency
}

type dependency struct {
	name string
	path string
	node *yaml.Node
}

func (v *validator) document(doc *yaml.Node) {
	if doc == nil || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		v.add(nil, "", "document is empty")
		return
	}
	if !v.noAnchors(doc) {
		return
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		v.add(top, "", "document must be a mapping, got %s", describe(top))
		return
	}
	var hasName, hasServices bool
	v.fields(top, "", func(key string, k, val *yaml.Node) {
		path := join("", key)
		switch key {
		case "name":
			hasName = true
			if !v.present(val, path, true) {
				return
			}
			if s, ok := v.str(val, path); ok && !isDNSLabel(s) {
				v.add(val, path, "%s is not a DNS label: %s", clip(s), dnsLabelRule)
			}
		case "description":
			if !v.present(val, path, false) {
				return
			}
			if s, ok := v.str(val, path); ok && utf8.RuneCountInString(s) > MaxDescriptionLength {
				v.add(val, path, "must be at most %d characters, got %d", MaxDescriptionLength, utf8.RuneCountInString(s))
			}
		case "services":
			hasServices = true
			if v.present(val, path, true) {
				v.services(val, path)
			}
		default:
			v.add(k, path, "unknown field")
		}
	})
	if !hasName {
		v.add(top, "name", "required")
	}
	if !hasServices {
		v.add(top, "services", "required")
	}
}

const dnsLabelRule = "1-63 characters of a-z, 0-9 and '-', not starting or ending with '-'"

func (v *validator) services(n *yaml.Node, path string) {
	if !v.mapping(n, path) {
		return
	}
	count := len(n.Content) / 2
	switch {
	case count == 0:
		v.add(n, path, "must have at least one service")
	case count > MaxServices:
		v.add(n, path, "must have at most %d services, got %d", MaxServices, count)
	}
	var all []*service
	v.fields(n, path, func(name string, k, val *yaml.Node) {
		p := join(path, name)
		if !isDNSLabel(name) {
			v.add(k, p, "service name %s is not a DNS label: %s", clip(name), dnsLabelRule)
		}
		s := &service{name: name}
		all = append(all, s)
		v.service(val, p, s)
	})
	v.dependencies(all)
}

func (v *validator) service(n *yaml.Node, path string, s *service) {
	if n.Kind != yaml.MappingNode {
		v.add(n, path, "must be a mapping, got %s", describe(n))
		return
	}
	hasImage := false
	v.fields(n, path, func(key string, k, val *yaml.Node) {
		p := join(path, key)
		switch key {
		case "image":
			hasImage = true
			if !v.present(val, p, true) {
				return
			}
			img, ok := v.str(val, p)
			switch {
			case !ok:
			case img == "":
				v.add(val, p, "must not be empty")
			case strings.IndexFunc(img, unicode.IsSpace) >= 0:
				v.add(val, p, "must not contain white space")
			}
		case "ports":
			if v.present(val, p, false) {
				v.ports(val, p)
			}
		case "env":
			if v.present(val, p, false) {
				v.env(val, p)
			}
		case "depends_on":
			if v.present(val, p, false) {
				v.dependsOn(val, p, s)
			}
		case "resources":
			if v.present(val, p, false) {
				v.resources(val, p)
			}
		default:
			v.add(k, p, "unknown field")
		}
	})
	if !hasImage {
		v.add(n, join(path, "image"), "required")
	}
}

func (v *validator) ports(n *yaml.Node, path string) {
	if !v.sequence(n, path) {
		return
	}
	seen := make(map[int64]bool, len(n.Content))
	for i, item := range n.Content {
		p := index(path, i)
		port, ok := v.integer(item, p, 1, 65535)
		if !ok {
			continue
		}
		if seen[port] {
			v.add(item, p, "duplicate port %d", port)
		}
		seen[port] = true
	}
}

func (v *validator) env(n *yaml.Node, path string) {
	if !v.mapping(n, path) {
		return
	}
	v.fields(n, path, func(key string, k, val *yaml.Node) {
		p := join(path, key)
		if !isEnvName(key) {
			v.add(k, p, "variable name %s must match ^[A-Za-z_][A-Za-z0-9_]*$", clip(key))
		}
		switch kind := describe(val); kind {
		case "string", "integer", "float", "boolean":
		default:
			v.add(val, p, "must be a string, number or boolean, got %s", kind)
		}
	})
}

func (v *validator) dependsOn(n *yaml.Node, path string, s *service) {
	if !v.sequence(n, path) {
		return
	}
	for i, item := range n.Content {
		p := index(path, i)
		if name, ok := v.str(item, p); ok {
			s.deps = append(s.deps, dependency{name: name, path: p, node: item})
		}
	}
}

func (v *validator) resources(n *yaml.Node, path string) {
	if !v.mapping(n, path) {
		return
	}
	v.fields(n, path, func(key string, k, val *yaml.Node) {
		p := join(path, key)
		switch key {
		case "vcpus":
			if v.present(val, p, false) {
				v.integer(val, p, 1, MaxVCPUs)
			}
		case "memory_gb":
			if v.present(val, p, false) {
				v.integer(val, p, 1, MaxMemoryGB)
			}
		default:
			v.add(k, p, "unknown field")
		}
	})
}

// dependencies checks that every dependency names another service, once, and
// that no service depends on itself through others.
func (v *validator) dependencies(all []*service) {
	byName := make(map[string]int, len(all))
	for i, s := range all {
		byName[s.name] = i
	}
	edges := make([][]int, len(all))       // service index to the services it depends on
	from := make([][]dependency, len(all)) // the dependency behind each edge
	for i, s := range all {
		seen := make(map[string]bool, len(s.deps))
		for _, d := range s.deps {
			j, ok := byName[d.name]
			switch {
			case d.name == s.name:
				v.add(d.node, d.path, "a service cannot depend on itself")
			case !ok:
				v.add(d.node, d.path, "no service named %s", clip(d.name))
			case seen[d.name]:
				v.add(d.node, d.path, "duplicate dependency on %s", clip(d.name))
			default:
				edges[i] = append(edges[i], j)
				from[i] = append(from[i], d)
			}
			seen[d.name] = true
		}
	}

	// Depth-first search in document order; an edge back to a service on the
	// current path closes a cycle, reported once, at that edge.
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(all))
	var path []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		path = append(path, i)
		for e, j := range edges[i] {
			switch state[j] {
			case unvisited:
				visit(j)
			case onPath:
				start := slices.Index(path, j)
				d := from[i][e]
				v.add(d.node, d.path, "dependency cycle: %s", cycle(all, path[start:]))
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range all {
		if state[i] == unvisited {
			visit(i)
		}
	}
}

// cycle describes a dependency cycle, shortened if long.
func cycle(all []*service, members []int) string {
	const most = 10
	var b strings.Builder
	for n, i := range members {
		if n == most {
			fmt.Fprintf(&b, "… (%d services) -> ", len(members))
			break
		}
		b.WriteString(clip(all[i].name))
		b.WriteString(" -> ")
	}
	b.WriteString(clip(all[members[0]].name))
	return b.String()
}

// noAnchors reports the first anchor or alias in the document, if any, and
// returns whether there were none. The format forbids them because a few
// bytes of aliases can stand for gigabytes of data; rejecting the document
// outright means nothing else ever follows an alias.
func (v *validator) noAnchors(doc *yaml.Node) bool {
	// An explicit stack, children pushed last to first, visits the nodes in
	// document order without recursion. Paths are built only for the node
	// reported, from parent links, so that deep documents stay linear.
	type visit struct {
		n      *yaml.Node
		parent *visit
		key    string // in the parent mapping, if any
		index  int    // in the parent sequence, if any
	}
	var (
		first *visit
		count int
		stack = []*visit{{n: doc}}
	)
	for len(stack) > 0 {
		at := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if at.n.Anchor != "" || at.n.Kind == yaml.AliasNode {
			if first == nil {
				first = at
			}
			count++
		}
		switch at.n.Kind {
		case yaml.MappingNode:
			for i := len(at.n.Content) - 1; i >= 0; i-- {
				// A key, and its value, take the path of the key if it is a
				// scalar, of the mapping if not.
				child := &visit{n: at.n.Content[i], parent: at.parent, key: at.key, index: at.index}
				if k := at.n.Content[i&^1]; k.Kind == yaml.ScalarNode {
					child.parent, child.key = at, k.Value
				}
				stack = append(stack, child)
			}
		case yaml.SequenceNode, yaml.DocumentNode:
			for i := len(at.n.Content) - 1; i >= 0; i-- {
				stack = append(stack, &visit{n: at.n.Content[i], parent: at, index: i})
			}
		}
	}
	if first == nil {
		return true
	}
	var chain []*visit
	for at := first; at.parent != nil; at = at.parent {
		chain = append(chain, at)
	}
	path := ""
	for _, at := range slices.Backward(chain) {
		switch at.parent.n.Kind {
		case yaml.MappingNode:
			path = join(path, at.key)
		case yaml.SequenceNode:
			path = index(path, at.index)
		}
	}
	v.add(first.n, path, "anchors and aliases (&name, *name) are not allowed; this document has %d", count)
	return false
}

// fields calls fn for each key and value of mapping n, in document order,
// after reporting anchors and aliases, keys that are not scalars and keys
// already seen; fn is not called for those.
func (v *validator) fields(n *yaml.Node, path string, fn func(key string, k, val *yaml.Node)) {
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			v.add(k, path, "a key must be a string, got %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		if seen[k.Value] {
			v.add(k, p, "duplicate key")
			continue
		}
		seen[k.Value] = true
		fn(k.Value, k, val)
	}
}

// present reports whether the value of a field is there to check: a null
// value counts as absent, which is a violation if the field is required.
func (v *validator) present(n *yaml.Node, path string, required bool) bool {
	if !isNull(n) {
		return true
	}
	if required {
		v.add(n, path, "required")
	}
	return false
}

// mapping reports whether n is a mapping, to check further.
func (v *validator) mapping(n *yaml.Node, path string) bool {
	if n.Kind != yaml.MappingNode {
		v.add(n, path, "must be a mapping, got %s", describe(n))
		return false
	}
	return true
}

// sequence reports whether n is a sequence, to check further.
func (v *validator) sequence(n *yaml.Node, path string) bool {
	if n.Kind != yaml.SequenceNode {
		v.add(n, path, "must be a sequence, got %s", describe(n))
		return false
	}
	return true
}

// str returns the string n holds.
func (v *validator) str(n *yaml.Node, path string) (string, bool) {
	if describe(n) != "string" {
		v.add(n, path, "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// integer returns the integer n holds if it is in [low, high].
func (v *validator) integer(n *yaml.Node, path string, low, high int64) (int64, bool) {
	if describe(n) != "integer" {
		v.add(n, path, "must be an integer from %d to %d, got %s", low, high, describe(n))
		return 0, false
	}
	var i int64
	if err := n.Decode(&i); err != nil {
		v.add(n, path, "must be from %d to %d", low, high)
		return 0, false
	}
	if i < low || i > high {
		v.add(n, path, "must be from %d to %d, got %d", low, high, i)
		return 0, false
	}
	return i, true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the type of n for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	case yaml.ScalarNode:
		switch tag := n.ShortTag(); tag {
		case "!!str":
			return "string"
		case "!!int":
			return "integer"
		case "!!float":
			return "float"
		case "!!bool":
			return "boolean"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "timestamp"
		case "!!binary":
			return "binary"
		default:
			return "value tagged " + clip(tag)
		}
	}
	return "document"
}

// join returns the path of key in the mapping at path. A key that is not a
// plain word is quoted, so that a dot in it cannot be read as a separator.
func join(path, key string) string {
	if !isPlainKey(key) {
		return path + "[" + clip(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// index returns the path of item i in the sequence at path.
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isPlainKey(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isEnvName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// clip quotes s for a message or path, shortened to its first 64 bytes (on a
// character boundary) so that a huge key or value cannot make huge
// violations.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
