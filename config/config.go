// Package config loads ompsync's configuration from flags, the environment
// (OMPSYNC_*), a YAML file and built-in defaults, strongest first, and
// validates it so that every later use can trust it.
//
// Every key is one entry in a table (keys.go); its environment variable,
// flag name, file syntax, 'config show' line and 'config init' line all follow
// from that entry.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ompsync/ompsync/compact"
	"github.com/ompsync/ompsync/remote"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Config is the validated configuration. Paths are absolute, the remote URL
// is normalised, durations are positive (or 0 where a key says 0 means off).
type Config struct {
	AgentDir, Remote, StateDir, Machine string
	// Agents are the agents to back up (empty: every known one whose
	// folder exists; see BackedUp); AgentDirOf gives each one's folder.
	Agents                      []string
	folders                     map[string]*string // <agent>.dir: see folder
	Interval, ReconcileInterval time.Duration
	Transfers                   int
	Include, Exclude            []string
	S3                          S3
	Sync                        Sync
	// Projects are where this machine's checkouts are looked for, and
	// PathMap the FROM=TO folder pairs, for placing other machines'
	// sessions (pull and restore).
	Projects   Projects
	PathMap    []string
	Log        Log
	Metrics    Metrics
	Notify     Notify
	Encryption Encryption
	Compaction Compaction
	Retention  Retention
	Search     Search
	MCP        MCP
	Restore    Restore
	Verify     Verify
	File       string // the config file actually read, "" if none

	sources  map[string]Source
	warnings []string
}

// S3 configures the S3 drivers; the remote URL gives Bucket and Prefix.
type S3 = remote.S3Config

// Sync configures pulling other machines' sessions.
type Projects struct {
	Roots []string
}

type Sync struct {
	Pull         bool
	PullInterval time.Duration
	Include      []string
	Exclude      []string
}

// Notify configures the agent's alerts (package notify).
type Notify struct {
	URL, Command        string
	Grace, PingInterval time.Duration
}

// Encryption configures client-side encryption (age). It is on when any
// field is set.
type Encryption struct {
	Recipients     []string
	IdentityFile   string
	PassphraseFile string
}

// Enabled reports whether objects are to be encrypted.
func (e Encryption) Enabled() bool {
	return len(e.Recipients) > 0 || e.IdentityFile != "" || e.PassphraseFile != ""
}

// Compaction says when the agent merges a session's small chunks.
type Compaction struct {
	Idle      time.Duration
	MaxChunks int
}

// Size is a size as written (see ParseSize); Load checks it.
type Size string

// Bytes is the size in bytes.
func (s Size) Bytes() int64 {
	n, _ := ParseSize(string(s)) // checked when loaded
	return n
}

// Verify configures the agent's own check of its backup.
type Verify struct {
	// DailyRead is how much the agent reads back each day.
	DailyRead Size
}

// MCP configures ompsync mcp.
type MCP struct {
	// Redact masks what looks like a credential in results.
	Redact bool
}

// Search configures ompsync grep's local cache.
type Search struct {
	// CacheSize is the bound on the cache.
	CacheSize Size
}

// Restore bounds what restore and pull hold in memory.
type Restore struct {
	// MaxMergeSize bounds the index of a line-by-line merge of diverged
	// copies (session.Index, session.LineCost a line).
	MaxMergeSize Size
}

// Retention says how long what is no longer current stays on the remote;
// 0 means forever.
type Retention = compact.Retention

// Log configures logging.
type Log struct{ Level, Format string }

// Metrics configures the Prometheus endpoint.
type Metrics struct{ Addr string }

// LoadOptions say where Load finds its inputs.
type LoadOptions struct {
	// ConfigFile is the --config value; "" means $OMPSYNC_CONFIG, else the
	// default path (see FilePath).
	ConfigFile string
	// Flags, if not nil, is searched for a flag named FlagName(key) for each
	// key; a flag the user set overrides everything else.
	Flags *pflag.FlagSet
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// EnvNames are the names of the variables set, in which an OMPSYNC_
	// variable that names no setting is an error. Nil means os.Environ's
	// names when LookupEnv is nil too, and no check otherwise.
	EnvNames []string
	// Hostname gives the default machine name; nil means os.Hostname.
	Hostname func() (string, error)
}

// SourceKind says which layer a value came from.
type SourceKind int

// The layers, weakest first.
const (
	FromDefault SourceKind = iota
	FromFile
	FromEnv
	FromFlag
)

// Source is where a value came from.
type Source struct {
	Kind SourceKind
	// Name is the flag ("--remote"), the variable, or the file's path; for
	// a default, the variable it was taken from ("$AWS_CA_BUNDLE"), if any.
	Name string
	Line int // the line in the file, for FromFile
}

func (s Source) String() string {
	switch {
	case s.Kind != FromDefault:
		return s.KindName() + " " + s.Where() // "flag --remote", "file /path:3"
	case s.Name != "":
		return "default, from " + s.Name
	}
	return "default"
}

// Where is the flag, the variable or the file:line a value came from.
func (s Source) Where() string {
	if s.Kind == FromFile && s.Line > 0 {
		return fmt.Sprintf("%s:%d", s.Name, s.Line)
	}
	return s.Name
}

// KindName is "default", "file", "env" or "flag".
func (s Source) KindName() string {
	return [...]string{"default", "file", "env", "flag"}[s.Kind]
}

// KeyError is a bad value for one key. The message names the key, where the
// value came from, what is wrong and what to write instead.
type KeyError struct {
	Key    string
	Source Source
	Err    error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("%s (%s): %v", e.Key, e.Source, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// Load reads the configuration: flags over environment over file over
// defaults. opts.Flags may be nil.
func Load(opts LoadOptions) (*Config, error) {
	e := opts.environ()
	if err := checkEnvNames(opts.envNames(), e); err != nil {
		return nil, err
	}
	path, explicit, err := FilePath(opts)
	if err != nil {
		return nil, err
	}
	c := &Config{sources: map[string]Source{}}

	fv := &fileValues{values: map[string]any{}}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if fv, err = parseFile(path, data); err != nil {
			return nil, err
		}
		c.File = path
		if w := permWarning(path); w != "" {
			c.warnings = append(c.warnings, w)
		}
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// no file at the default path: defaults and environment only
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("config file %s does not exist; create it with 'ompsync config init', or fix --config / OMPSYNC_CONFIG", path)
	case isDir(path):
		return nil, fmt.Errorf("config file %s is a folder: name the file in it (--config %s), or fix --config / OMPSYNC_CONFIG", path, filepath.Join(path, "config.yaml"))
	default:
		return nil, fmt.Errorf("config file: %w: make it readable by you (chmod 600), or name another with --config", err)
	}

	// Viper layers the values. It reads the environment only through
	// os.LookupEnv, so the injected environment goes in through Set, which
	// outranks flags: it is skipped for keys whose flag was given.
	v := viper.New()
	if err := v.MergeConfigMap(fv.values); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	for _, k := range keys {
		e.from = ""
		d, defErr := k.defaultOf(e)
		if defErr == nil {
			v.SetDefault(k.name, d)
		}
		var f *pflag.Flag
		if opts.Flags != nil {
			if f = opts.Flags.Lookup(FlagName(k.name)); f != nil {
				_ = v.BindPFlag(k.name, f) // fails only for a nil flag
			}
		}
		src := Source{Kind: FromDefault, Name: e.from} // e.from: the variable the default came from
		envVal, envSet := e.get(EnvVar(k.name))
		switch {
		case f != nil && f.Changed:
			src = Source{Kind: FromFlag, Name: "--" + f.Name}
		case envSet:
			src = Source{Kind: FromEnv, Name: EnvVar(k.name)}
			v.Set(k.name, envVal)
		case fv.values[k.name] != nil:
			src = Source{Kind: FromFile, Name: path, Line: fv.lines[k.name]}
		case defErr != nil:
			return nil, &KeyError{Key: k.name, Source: src, Err: defErr}
		}
		raw := v.Get(k.name)
		val, err := parseValue(k, raw, e)
		if err != nil {
			return nil, &KeyError{Key: k.name, Source: src, Err: hideSecret(k, raw, err)}
		}
		assign(k.field(c), val)
		c.sources[k.name] = src
	}
	if err := c.checkPathStyle(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkPathStyle applies what s3.path_style must be for the endpoint: one
// that is an IP address or localhost has no names under it for a bucket
// (bucket.127.0.0.1 would be looked up in the DNS, off the machine), so it
// defaults to true there, and false is refused.
func (c *Config) checkPathStyle() error {
	if c.S3.PathStyle || c.S3.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(c.S3.Endpoint)
	if err != nil {
		return nil // the endpoint's own check says what is wrong
	}
	host := u.Hostname()
	if net.ParseIP(host) == nil && host != "localhost" {
		return nil
	}
	if src := c.sources["s3.path_style"]; src.Kind != FromDefault {
		return &KeyError{Key: "s3.path_style", Source: src, Err: fmt.Errorf("s3.endpoint %s is an IP address or localhost, which cannot name a bucket (bucket.endpoint): set it to true", host)}
	}
	c.S3.PathStyle = true
	return nil
}

// hideSecret keeps a secret key's value out of its error message, and the
// reason in: "the value (not shown: a secret) is not an http(s) URL".
func hideSecret(k key, raw any, err error) error {
	s := fmt.Sprint(raw)
	if k.redact == redactNone || s == "" {
		return err
	}
	// The reason quotes the value (%q): that goes, the reason stays. A
	// value still there bare, or not quoted, takes the reason with it.
	msg := strings.ReplaceAll(err.Error(), strconv.Quote(s), "the value (not shown: a secret)")
	if strings.Contains(msg, s) {
		return errors.New("the value is not valid (not shown: it is a secret)")
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func permWarning(path string) string {
	if runtime.GOOS == "windows" {
		return ""
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o044 == 0 {
		return ""
	}
	return fmt.Sprintf("config file %s is readable by other users (mode %04o) and may hold keys; run: chmod 600 %s",
		path, fi.Mode().Perm(), path)
}

// parseValue turns a layered value (a string, or a typed flag's value; a
// []string from a list flag or the file) into the field's type.
func parseValue(k key, raw any, e *environ) (any, error) {
	var out any
	var err error
	if _, list := k.field(&Config{}).(*[]string); list {
		out, err = asPaths(k, asList(raw), e)
	} else {
		out, err = asScalar(k, raw, e)
	}
	if err != nil || k.check == nil {
		return out, err
	}
	return k.check(out)
}

// asScalar is a one-value key's value, of its field's type.
func asScalar(k key, raw any, e *environ) (any, error) {
	s, err := asString(raw)
	if err != nil {
		return nil, err
	}
	switch k.field(&Config{}).(type) {
	case *string:
		return asText(k, s, e)
	case *bool:
		return asBool(s)
	case *time.Duration:
		return asDuration(s, k)
	case *int:
		return asInt(s)
	}
	panic("config: key " + k.name + " has a field of an unsupported type")
}

// asText is a string key's value: a path key's expanded (an optional one
// may be empty), an enum key's one of its values.
func asText(k key, s string, e *environ) (string, error) {
	if k.path && !(k.optional && strings.TrimSpace(s) == "") {
		if strings.TrimSpace(s) == "" {
			return "", errors.New("the value is empty; give a folder (a leading ~ means your home)")
		}
		var err error
		if s, err = e.expand(s); err != nil {
			return "", err
		}
	}
	if k.enum != nil {
		return oneOf(s, k.enum)
	}
	return s, nil
}

// asPaths expands a path key's list items.
func asPaths(k key, list []string, e *environ) ([]string, error) {
	if !k.path {
		return list, nil
	}
	for i, s := range list {
		var err error
		if list[i], err = e.expand(s); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// assign sets the field field points at to val, which parseValue made of
// the field's type.
func assign(field, val any) { reflect.ValueOf(field).Elem().Set(reflect.ValueOf(val)) }

func asString(raw any) (string, error) {
	switch r := raw.(type) {
	case string:
		return r, nil
	case []string:
		return "", errors.New("want one value, not a list")
	case nil:
		return "", nil
	}
	return fmt.Sprint(raw), nil
}

func oneOf(s string, allowed []string) (string, error) {
	if l := strings.ToLower(strings.TrimSpace(s)); slices.Contains(allowed, l) {
		return l, nil
	}
	return "", fmt.Errorf("%q is not one of %s", s, strings.Join(allowed, ", "))
}

func asBool(s string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean; write true or false", s)
	}
	return b, nil
}

// asDuration parses a positive duration; for an optional key, 0 (off) too.
func asDuration(s string, k key) (time.Duration, error) {
	// The example is the key's default: a fixed one (5s) misled a user to
	// keep superseded generations 5 seconds instead of 720h.
	like := k.def + " (the default)"
	if d, err := time.ParseDuration(k.def); err != nil || d == 0 {
		like = "720h, or 0 (the default)"
	}
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
			return 0, fmt.Errorf("%q has no unit; write a duration like %s; units are h, m, s and ms", s, like)
		}
		return 0, fmt.Errorf("%q is not a duration; write it like %s; units are h, m, s and ms", s, like)
	}
	if d < 0 || d == 0 && !k.optional {
		return 0, fmt.Errorf("%q is not positive; write a duration above zero like %s", s, like)
	}
	return d, nil
}

// asInt parses a whole number above zero.
func asInt(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a whole number above zero; write it like 64", s)
	}
	return n, nil
}

// asList takes a file's YAML list, or a comma-separated string from a flag,
// the environment or the file; blank items are dropped.
func asList(raw any) []string {
	var items []string
	switch r := raw.(type) {
	case []string:
		items = r
	case string:
		items = strings.Split(r, ",")
	case nil:
	default:
		items = []string{fmt.Sprint(r)}
	}
	out := []string{}
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// Source returns where key's value came from.
func (c *Config) Source(key string) Source { return c.sources[key] }

// Warnings returns problems worth telling the user that do not stop ompsync,
// such as a config file other users can read.
func (c *Config) Warnings() []string { return c.warnings }

// Setting is one key's value and origin, for display. Secret values are
// already redacted.
type Setting struct {
	Key    string
	Env    string
	Value  any // string, bool, time.Duration or []string
	Source Source
	Help   string
}

// Redacted stands in for a secret in anything ompsync prints.
const Redacted = remote.Redacted

// Settings lists every key in table order with its value and source.
// Secrets are redacted; a long access key id keeps its first four characters,
// which tell keys apart without revealing them.
func (c *Config) Settings() []Setting {
	out := make([]Setting, 0, len(keys))
	for _, k := range keys {
		// A list is c's own, as the exported fields are: no copy.
		val := reflect.ValueOf(k.field(c)).Elem().Interface()
		if s, ok := val.(string); ok && s != "" {
			switch k.redact {
			case redactFull:
				val = Redacted
			case redactPartial:
				val = remote.RedactKeyID(s)
			}
		}
		out = append(out, Setting{
			Key: k.name, Env: EnvVar(k.name), Value: val, Source: c.sources[k.name], Help: k.help,
		})
	}
	return out
}

// FormatValue renders a setting's value the way the environment takes it:
// lists comma-separated, durations like 2s.
func FormatValue(v any) string {
	switch v := v.(type) {
	case []string:
		return strings.Join(v, ",")
	case time.Duration:
		return shortDuration(v)
	}
	return fmt.Sprint(v)
}

// shortDuration drops zero units time.Duration.String keeps: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// LogLevel is log.level as a slog level.
func (c *Config) LogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.Log.Level)) // checked when loaded; info otherwise
	return l
}

// LeveledLogger builds a logger writing to w in log.format at level, which
// may change while it logs (a *slog.LevelVar: the agent applies a new
// log.level on SIGHUP).
func (c *Config) LeveledLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
