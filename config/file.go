package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fileValues is what a config file sets: dotted key -> string or []string,
// each scalar exactly as written (so "machine: 007" stays "007").
type fileValues struct {
	values map[string]any
	lines  map[string]int // line each key was first given on
}

// parseFile checks the file's shape and keys. Viper would accept any key and
// coerce types silently; walking the YAML nodes ourselves lets an unknown or
// misplaced key fail with its name and line.
func parseFile(path string, data []byte) (*fileValues, error) {
	fv := &fileValues{values: map[string]any{}, lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, oneLine(err.Error()))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return fv, nil // empty, or only comments
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return fv, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s:%d: want \"key: value\" lines at the top level", path, root.Line)
	}
	if err := fv.walk(path, "", root); err != nil {
		return nil, err
	}
	return fv, nil
}

func (fv *fileValues) walk(path, prefix string, m *yaml.Node) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, vn := m.Content[i], deref(m.Content[i+1])
		name := prefix + strings.ToLower(kn.Value)
		if _, ok := lookupKey(name); ok {
			// An edit that left the old line behind would otherwise let the
			// last one win silently.
			if first, again := fv.lines[name]; again {
				return fmt.Errorf("config file %s:%d: %s is set again (first at %s:%d); keep one", path, kn.Line, name, path, first)
			}
			fv.lines[name] = kn.Line
			v, err := scalarOrList(vn)
			if err != nil {
				return fmt.Errorf("%s (file %s:%d): %v", name, path, kn.Line, err)
			}
			if v != nil {
				fv.values[name] = v
			}
			continue
		}
		if sk := sectionKeys(name); len(sk) > 0 { // a section, such as s3
			switch {
			case vn.Kind == yaml.MappingNode:
				if err := fv.walk(path, name+".", vn); err != nil {
					return err
				}
			case vn.Kind == yaml.ScalarNode && vn.Tag == "!!null":
				// "s3:" with every key below commented out
			default:
				return fmt.Errorf("config file %s:%d: %s holds keys (%s), not a value; indent them under \"%s:\"",
					path, kn.Line, name, strings.Join(sk, ", "), kn.Value)
			}
			continue
		}
		msg := fmt.Sprintf("config file %s:%d: unknown key %q", path, kn.Line, name)
		if s := suggest(name); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return fmt.Errorf("%s; remove it (docs/CONFIG.md lists every key; 'ompsync config init --path FILE' writes them all to FILE)", msg)
	}
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// scalarOrList returns a scalar's text, a list of scalars' texts, or nil for
// a null value (which leaves the key unset).
func scalarOrList(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, nil
		}
		return n.Value, nil
	case yaml.SequenceNode:
		out := []string{}
		for _, item := range n.Content {
			item = deref(item)
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return nil, fmt.Errorf("list items must be plain values (line %d)", item.Line)
			}
			out = append(out, item.Value)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("want a value or a list, not a mapping")
	}
}

// sectionKeys are the keys of a section ("s3"); none when name is no section.
func sectionKeys(section string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k.name, section+".") {
			out = append(out, k.name)
		}
	}
	return out
}

// suggest returns the known key closest to name, if it is close enough to be
// a typo.
func suggest(name string) string {
	best, bestDist := "", 4 // a typo is 3 edits at most
	for _, k := range keys {
		d := editDistance(name, k.name)
		// also match a key written without its section ("client" for s3.client)
		if _, leaf, ok := strings.Cut(k.name, "."); ok && leaf == name {
			d = 1
		}
		if d < bestDist && d < len(name) {
			best, bestDist = k.name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
