package config

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

const starterHeader = `# ompsync configuration, written by 'ompsync config init'.
#
# Every key below shows its default. Each can also come from the environment,
# OMPSYNC_ + the key upper-cased with dots as underscores (s3.client is
# OMPSYNC_S3_CLIENT; lists are comma-separated there), and some from flags
# (--agent-dir, --remote, --state-dir, --machine, --log-level, --log-format).
# Flags win over the environment, which wins over this file.
# A key whose default follows this machine (its host name, home folder or
# environment) or another key is left commented out, showing what it is
# here: uncomment it to fix it.
# 'ompsync config show' prints what is in effect and where each value came from.
#
# This file can hold S3 keys: keep it private (chmod 600).
`

// Starter returns a commented YAML config file that sets every key to its
// default in the environment opts describes, but for the derived ones,
// shown commented out. It loads cleanly as it is.
func Starter(opts LoadOptions) ([]byte, error) {
	e := opts.environ()
	var b bytes.Buffer
	b.WriteString(starterHeader)
	section := ""
	for _, k := range keys {
		sec, leaf, nested := strings.Cut(k.name, ".")
		indent := ""
		switch {
		case !nested:
			section, leaf = "", k.name
			b.WriteString("\n")
		case sec != section:
			section, indent = sec, "  "
			fmt.Fprintf(&b, "\n%s:\n", sec)
		default:
			indent = "  "
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s# %s\n", indent, k.help)
		d, err := k.defaultOf(e)
		if err != nil {
			// e.g. a host name that makes no machine name: leave the key
			// for the user to fill in rather than write a value that fails.
			fmt.Fprintf(&b, "%s# %s:   (no default here: %v)\n", indent, leaf, err)
			continue
		}
		val, err := starterValue(k, d)
		if err != nil {
			return nil, fmt.Errorf("default of %s: %w", k.name, err)
		}
		if k.derived {
			fmt.Fprintf(&b, "%s# %s: %s\n", indent, leaf, val)
			continue
		}
		fmt.Fprintf(&b, "%s%s: %s\n", indent, leaf, val)
	}
	return b.Bytes(), nil
}

// starterValue renders a default as YAML of the key's type.
func starterValue(k key, d string) (string, error) {
	var v any = d // a string, or a duration as written in the table ("60s", not "1m0s")
	switch k.field(&Config{}).(type) {
	case *[]string:
		v = asList(d)
	case *bool, *int: // unquoted in YAML
		var err error
		if v, err = parseValue(k, d, nil); err != nil {
			return "", err
		}
	}
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return "", err
	}
	n.Style |= yaml.FlowStyle // lists on one line: include: ["a", "b"]
	out, err := yaml.Marshal(&n)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}
