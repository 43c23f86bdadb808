package config

import "time"

// KeyInfo describes a key, for the tests that check the table.
type KeyInfo struct {
	Name, Env, Flag, Help string
	// Kind is "string", "bool", "duration", "int" or "list".
	Kind   string
	Secret bool // never print the value, never take it from a flag
}

// Lookup describes the key name.
func Lookup(name string) (KeyInfo, bool) {
	k, ok := lookupKey(name)
	if !ok {
		return KeyInfo{}, false
	}
	kind := "string"
	switch k.field(&Config{}).(type) {
	case *bool:
		kind = "bool"
	case *time.Duration:
		kind = "duration"
	case *int:
		kind = "int"
	case *[]string:
		kind = "list"
	}
	return KeyInfo{
		Name: k.name, Env: EnvVar(k.name), Flag: FlagName(k.name), Help: k.help,
		Kind: kind, Secret: k.redact != redactNone,
	}, true
}
