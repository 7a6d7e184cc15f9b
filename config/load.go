package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// maxFileSize bounds the configuration file: a real one is a few KiB, and a
// bound keeps a wrong path (a log, a device) from being read whole.
const maxFileSize = 1 * MiB

// Load reads the YAML file at path onto Default, applies the environment
// overrides (ApplyEnv with os.Getenv), and validates the result.
//
// A field the file omits keeps its default. A list the file sets replaces
// the default list: in particular an operations list replaces the whole
// default operation table, and must then hold a row for every procedure.
// Likewise a limits.plans map replaces the default plans whole, and a plan
// it lists is given whole: a field it leaves out (shadow aside) is an error,
// as in a subject's quotas; no bound is written unlimited (see Count).
//
// Errors name the field by its YAML path and, where the file sets it, its
// line; a value that came from an environment variable says so. Every
// problem found is reported, one per line.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return LoadData(path, data, os.Getenv)
}

// LoadData is Load of data, the content of the file named name (for
// messages), with the environment overrides getenv gives (os.Getenv in
// Load): a caller that reads the file itself, as a reload that waits for
// the file to stop changing does, validates exactly what it read.
//
// A file that holds no configuration (empty, blank, comments or a null
// document alone) is refused: a file cut short while it is written reads
// like that, and would otherwise validate as the defaults.
func LoadData(name string, data []byte, getenv func(string) string) (*Config, error) {
	c, lines, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	if lines.empty {
		return nil, fmt.Errorf("config %s: holds no configuration (an empty file is refused: a file being written can read empty)", name)
	}
	c.ApplyEnv(getenv)
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", name, locate(err, lines, envSources(getenv)))
	}
	return c, nil
}

// ReadFile reads a configuration file, at most 1 MiB of it: a larger file
// is an error.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(maxFileSize)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > int(maxFileSize) {
		return nil, fmt.Errorf("%s: larger than %s", path, maxFileSize)
	}
	return data, nil
}

// parse decodes YAML onto Default, without environment overrides and
// without validation. Unknown fields, malformed values and a second YAML
// document are errors. Empty data yields Default.
func parse(data []byte) (*Config, *lineIndex, error) {
	c := Default()
	idx := &lineIndex{path: map[string]int{}, line: map[int]string{}}

	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			idx.empty = true
			return c, idx, nil
		}
		return nil, nil, err
	}
	idx.empty = len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null"
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("line %d: a second YAML document; the file must hold one", extra.Line)
	}

	w := walker{idx: idx, unknown: map[int]bool{}}
	w.walk(&doc, reflect.TypeFor[Config](), "")

	// The decoder adds a map's entries to the map already there; plans set
	// in the file are to replace the default plans, not add to them. The
	// probe sees plans however the file sets them, through aliases and
	// merges; its errors are the strict decoder's to report.
	var probe struct {
		Limits struct {
			Plans yaml.Node `yaml:"plans"`
		} `yaml:"limits"`
	}
	_ = doc.Decode(&probe)
	if probe.Limits.Plans.Kind != 0 {
		c.Limits.Plans = nil
	}

	// The walk names unknown fields by path; the decoder, strict as well,
	// reports malformed values and whatever the walk does not follow
	// (aliases), each with its line.
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	err := strict.Decode(c)
	var te *yaml.TypeError
	switch {
	case errors.As(err, &te):
		for _, s := range te.Errors {
			line, msg := splitLine(s)
			if w.unknown[line] && strings.Contains(msg, " not found in type ") {
				continue // reported by the walk, with its path
			}
			w.probs = append(w.probs, &fieldError{line: line, path: idx.line[line], msg: msg})
		}
	case err != nil:
		return nil, nil, err
	}
	if len(w.probs) > 0 {
		slices.SortStableFunc(w.probs, func(a, b *fieldError) int { return a.line - b.line })
		return nil, nil, w.probs
	}
	if len(c.Upstream.URLs) == 0 {
		c.Upstream.URLs = nil // "urls: []" means the default, url alone
	}
	if len(c.Redis.ClusterAddrs) == 0 {
		c.Redis.ClusterAddrs = nil // "cluster_addrs: []" means the default, none
	}
	if len(c.Redis.Sentinel.Addrs) == 0 {
		c.Redis.Sentinel.Addrs = nil // likewise
	}
	if len(c.Listen.ClientAddress.TrustedProxies) == 0 {
		c.Listen.ClientAddress.TrustedProxies = nil
	}
	if len(c.Listen.ConnectionBoundExempt) == 0 {
		c.Listen.ConnectionBoundExempt = nil
	}
	if len(c.CORS.AllowedOrigins) == 0 {
		c.CORS.AllowedOrigins = nil // "allowed_origins: []": no CORS
	}
	if len(c.Limits.SubjectPlans) == 0 {
		c.Limits.SubjectPlans = nil // "subject_plans: {}" likewise
	}
	if len(c.Limits.SubjectQuotas) == 0 {
		c.Limits.SubjectQuotas = nil
	}
	return c, idx, nil
}

// splitLine splits yaml's "line 12: message" into 12 and "message".
func splitLine(s string) (int, string) {
	rest, ok := strings.CutPrefix(s, "line ")
	if !ok {
		return 0, s
	}
	num, msg, ok := strings.Cut(rest, ": ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, s
	}
	return n, msg
}

// lineIndex maps YAML paths to the lines that set them and back.
type lineIndex struct {
	path map[string]int // "operations[3].procedure" -> 41
	line map[int]string // 41 -> "operations[3].procedure"; the first field on the line
	// empty: the file holds no document, or a null one.
	empty bool
}

// of returns the line of path or, failing that, of its nearest enclosing
// field in the file; 0 if none.
func (x *lineIndex) of(path string) int {
	for path != "" {
		if l, ok := x.path[path]; ok {
			return l
		}
		if strings.HasSuffix(path, "]") {
			path = path[:strings.LastIndexByte(path, '[')]
		} else if i := strings.LastIndexByte(path, '.'); i >= 0 {
			path = path[:i]
		} else {
			path = ""
		}
	}
	return 0
}

// walker follows a YAML document alongside the Go types it decodes into,
// recording where each field is set and reporting unknown fields by path.
// It does not follow aliases: the strict decoder checks those, and not
// expanding them keeps the walk linear in the file's size.
type walker struct {
	idx     *lineIndex
	unknown map[int]bool // lines with an unknown field reported
	probs   problems
}

func (w *walker) record(path string, line int, onLine bool) {
	if _, ok := w.idx.path[path]; !ok {
		w.idx.path[path] = line
	}
	if _, ok := w.idx.line[line]; onLine && !ok {
		w.idx.line[line] = path
	}
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.walk(c, t, path)
		}
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			w.walkMap(n, t, path)
			return
		}
		if t.Kind() != reflect.Struct {
			return // the decoder reports the mismatch
		}
		fields, names := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				w.walk(v, t, path)
				continue
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				w.unknown[k.Line] = true
				w.probs = append(w.probs, &fieldError{line: k.Line, path: p,
					msg: "unknown field; expected one of " + strings.Join(names, ", ")})
				continue
			}
			w.record(p, k.Line, true)
			w.walk(v, ft, p)
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return
		}
		for i, c := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			// A mapping item's line is better named by its first field.
			w.record(p, c.Line, c.Kind != yaml.MappingNode)
			w.walk(c, t.Elem(), p)
		}
	}
}

// walkMap records each entry of a map by its key, as mapPath names it in
// validation messages: "limits.plans.free".
func (w *walker) walkMap(n *yaml.Node, t reflect.Type, path string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			continue // the decoder reports a key that is no string
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			w.walk(v, t, path)
			continue
		}
		p := mapPath(path, k.Value)
		w.record(p, k.Line, true)
		w.walk(v, t.Elem(), p)
		w.whole(k, v, t.Elem(), p)
	}
}

// whole reports the fields that a plan or a subject's quotas (entries of
// limits.plans and limits.subject_quotas) leave out: such an entry is given
// whole, so that a field cut off by a half-written file is an error rather
// than a zero, which would read as no bound. A field tagged
// config:"optional" may be left out.
func (w *walker) whole(k, v *yaml.Node, t reflect.Type, path string) {
	if t != reflect.TypeFor[Plan]() && t != reflect.TypeFor[Quotas]() {
		return
	}
	keys, ok := mappingKeys(v, 0)
	if !ok {
		return // not a mapping: the decoder reports it
	}
	var missing []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if _, set := keys[name]; !set && f.Tag.Get("config") != "optional" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		w.probs = append(w.probs, &fieldError{line: k.Line, path: path,
			msg: "sets no " + strings.Join(missing, ", ") + ": it is given whole (write " + unlimitedWord + " for no bound)"})
	}
	if q, ok := keys["quotas"]; ok && t == reflect.TypeFor[Plan]() {
		w.whole(q.key, q.value, reflect.TypeFor[Quotas](), path+".quotas")
	}
}

// entry is one key of a mapping and its value.
type entry struct{ key, value *yaml.Node }

// maxMergeDepth bounds how deep mappingKeys follows aliases and merges.
const maxMergeDepth = 8

// mappingKeys returns the keys a mapping sets, through aliases and merge
// keys (the mapping's own keys win, as in decoding); a null value sets
// none. ok is false when n is no mapping.
func mappingKeys(n *yaml.Node, depth int) (keys map[string]entry, ok bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil && depth < maxMergeDepth {
		n, depth = n.Alias, depth+1
	}
	keys = map[string]entry{}
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return keys, true
	case n.Kind != yaml.MappingNode || depth >= maxMergeDepth:
		return nil, false
	}
	var own []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value != "<<" || k.ShortTag() != "!!merge" {
			own = append(own, entry{k, v})
			continue
		}
		merged := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			merged = v.Content
		}
		for _, m := range merged {
			mk, _ := mappingKeys(m, depth+1)
			maps.Copy(keys, mk)
		}
	}
	for _, e := range own {
		keys[e.key.Value] = e
	}
	return keys, true
}

// yamlFields returns a struct's YAML keys with their types, and the keys in
// declaration order for messages.
func yamlFields(t reflect.Type) (map[string]reflect.Type, []string) {
	fields := make(map[string]reflect.Type, t.NumField())
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	return fields, names
}

// locate adds to each validation problem where its value came from: the
// environment variables that set it, or else its line in the file.
func locate(err error, lines *lineIndex, env map[string]string) error {
	ps, ok := err.(problems)
	if !ok {
		return err
	}
	for _, p := range ps {
		if names := fromEnv(p.path, env); len(names) > 0 {
			p.msg += " (set by " + strings.Join(names, ", ") + ")"
			continue
		}
		if p.line == 0 {
			p.line = lines.of(p.path)
		}
	}
	return ps
}

// fromEnv returns the variables that set path, an element of it, or a field
// inside it ("listen.tls" is set by EDGE_TLS_CERT_FILE and EDGE_TLS_KEY_FILE).
func fromEnv(path string, env map[string]string) []string {
	var names []string
	for p, name := range env {
		if path == p || strings.HasPrefix(path, p+"[") || strings.HasPrefix(p, path+".") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
