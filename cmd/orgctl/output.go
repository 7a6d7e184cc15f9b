package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Output formats.
const (
	formatTable = "table"
	formatJSON  = "json"
)

// jsonOptions write the API's HTTP/JSON shape: lowerCamelCase names, and
// every field even when empty, so that a script finds the same fields in
// every answer.
var jsonOptions = protojson.MarshalOptions{EmitUnpopulated: true}

// writeJSON writes m as indented JSON. protojson varies its spacing on
// purpose; re-indenting makes the output the same from run to run.
func writeJSON(w io.Writer, m proto.Message, indent bool) error {
	raw, err := jsonOptions.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	var buf bytes.Buffer
	if indent {
		err = json.Indent(&buf, raw, "", "  ")
	} else {
		err = json.Compact(&buf, raw)
	}
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

// writeRecord writes one message as "Label  value" lines, nested messages
// flattened ("API usage limits requests per minute").
func writeRecord(w io.Writer, m proto.Message) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var walk func(prefix string, m protoreflect.Message)
	walk = func(prefix string, m protoreflect.Message) {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			label := strings.TrimSpace(prefix + " " + words(string(fd.Name())))
			if fd.Message() != nil && !isTimestamp(fd) && !fd.IsList() {
				if m.Has(fd) {
					walk(label, m.Get(fd).Message())
				}
				continue
			}
			if fd.IsList() && fd.Message() != nil {
				continue // lists of messages get a table of their own
			}
			fmt.Fprintf(tw, "%s\t%s\n", capitalize(label), cell(m, fd))
		}
	}
	walk("", m.ProtoReflect())
	return tw.Flush()
}

// writeTable writes messages of one type as a table, a column per scalar
// field (and timestamp), headed by the field's name in capitals.
func writeTable(w io.Writer, desc protoreflect.MessageDescriptor, rows []protoreflect.Message) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var cols []protoreflect.FieldDescriptor
	fields := desc.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsList() || fd.IsMap() || fd.Message() != nil && !isTimestamp(fd) {
			continue
		}
		cols = append(cols, fd)
	}
	var head []string
	for _, fd := range cols {
		head = append(head, strings.ToUpper(words(string(fd.Name()))))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		var cells []string
		for _, fd := range cols {
			cells = append(cells, cell(r, fd))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// listRows returns the elements of m's repeated field name.
func listRows(m proto.Message, name protoreflect.Name) (protoreflect.MessageDescriptor, []protoreflect.Message) {
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(name)
	list := r.Get(fd).List()
	rows := make([]protoreflect.Message, list.Len())
	for i := range list.Len() {
		rows[i] = list.Get(i).Message()
	}
	return fd.Message(), rows
}

func isTimestamp(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Timestamp"
}

// cell formats one field for a person: timestamps in RFC 3339 UTC, an unset
// optional or timestamp as "-", lists joined with commas.
func cell(m protoreflect.Message, fd protoreflect.FieldDescriptor) string {
	if isTimestamp(fd) {
		if !m.Has(fd) {
			return "-"
		}
		ts := &timestamppb.Timestamp{}
		proto.Merge(ts, m.Get(fd).Message().Interface())
		return ts.AsTime().UTC().Format(time.RFC3339)
	}
	if fd.HasPresence() && !m.Has(fd) {
		return "-"
	}
	v := m.Get(fd)
	if fd.IsList() {
		var parts []string
		for i := range v.List().Len() {
			parts = append(parts, fmt.Sprint(v.List().Get(i).Interface()))
		}
		return strings.Join(parts, ",")
	}
	s := fmt.Sprint(v.Interface())
	if s == "" {
		return "-"
	}
	return s
}

// words turns a snake_case field name into words: "display_name" is
// "display name".
func words(name string) string {
	s := strings.ReplaceAll(name, "_", " ")
	for _, acr := range []string{"id", "api", "gb", "vcpu"} {
		s = replaceWord(s, acr, strings.ToUpper(acr))
	}
	return s
}

func replaceWord(s, word, with string) string {
	parts := strings.Split(s, " ")
	for i, p := range parts {
		if p == word {
			parts[i] = with
		}
	}
	return strings.Join(parts, " ")
}

func capitalize(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
