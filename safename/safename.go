// Package safename holds the rules for the names that become one segment of
// an object key and of a local path (session ids, machine names) and for
// relative paths joined to a folder. It is a leaf: the repository format,
// each agent's store and the configuration check names by the same rules.
package safename

import "strings"

// SessionID reports whether id is safe as a session id: one path segment
// and one key segment of 1-128 characters of [A-Za-z0-9_-].
func SessionID(id string) bool {
	return id != "" && len(id) <= 128 && every(id, func(c byte) bool { return c != '.' && MachineByte(c) })
}

// MachineRule is quoted in messages about bad machine names.
const MachineRule = `1-64 characters of A-Z a-z 0-9 . _ -, not "." or ".."`

// Machine reports whether m can name a machine: it becomes one path
// segment of every object key the machine writes.
func Machine(m string) bool {
	return m != "" && len(m) <= 64 && m != "." && m != ".." && every(m, MachineByte)
}

// every reports whether ok holds for each byte of s.
func every(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// MachineByte reports whether b may stand in a machine name.
func MachineByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'
}

// RelPath reports whether a slash-separated relative path stays inside the
// folder it is joined to: no absolute path, no "." or ".." or empty
// segment, no NUL or backslash.
func RelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
