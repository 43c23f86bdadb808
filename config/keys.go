package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/project"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/safename"
	"github.com/spf13/pflag"
)

// redaction says how much of a value config show may print.
type redaction int

const (
	redactNone    redaction = iota
	redactFull              // never shown
	redactPartial           // the first few characters of a long value, then <redacted>
)

// key describes one configuration key. Adding a key is one entry in keys plus
// the struct field its name names (see field): its environment variable, flag
// name, file syntax, config show and config init all follow from this entry.
type key struct {
	name string // dotted, lower case: "s3.client"
	help string // one line, shown by config init and config show --help

	// fieldOf, when set, returns a pointer to the value's field in place
	// of the one the name names (see field).
	fieldOf func(c *Config) any

	// def is the default in the form a user would write it in the file
	// ("" when not set); defFunc, when set, computes it instead.
	def     string
	defFunc func(e *environ) (string, error)
	// derived marks a default that follows the machine (its host name,
	// home folder or environment) or another key (s3.path_style follows
	// s3.endpoint): config init writes it commented out, so that the file
	// does not pin what it was the day it was written.
	derived bool

	path bool // a file system path: ~ is expanded, relative paths made absolute
	// optional lets a path key be empty (unset), as an optional file is,
	// and a duration key be 0 (off, or forever).
	optional bool
	enum     []string // allowed values, if any
	redact   redaction

	// check validates and may normalise a parsed value; its error says what is
	// wrong and what to do, without repeating the key or its source.
	check func(v any) (any, error)
}

// checkPathMap checks each FROM=TO pair as pull and restore will read it.
func checkPathMap(v any) (any, error) {
	for _, s := range v.([]string) {
		if _, err := project.ParseMap(s); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// field returns a pointer to the Config field k sets: *string, *bool,
// *time.Duration, *int or *[]string, whose type decides how values parse.
// It is the field the name names, each dotted part a field's name without
// its underscores, in any case (s3.access_key_id: c.S3.AccessKeyID), unless
// fieldOf says otherwise.
func (k key) field(c *Config) any {
	if k.fieldOf != nil {
		return k.fieldOf(c)
	}
	v := reflect.ValueOf(c).Elem()
	for part := range strings.SplitSeq(k.name, ".") {
		name := strings.ReplaceAll(part, "_", "")
		if v = v.FieldByNameFunc(func(f string) bool { return strings.EqualFold(f, name) }); !v.IsValid() {
			panic("config: key " + k.name + " names no field of Config")
		}
	}
	if v.Kind() == reflect.String {
		return v.Addr().Convert(reflect.TypeFor[*string]()).Interface() // a Size too
	}
	return v.Addr().Interface()
}

// defaultOf is k's default as a user would write it.
func (k key) defaultOf(e *environ) (string, error) {
	if k.defFunc != nil {
		return k.defFunc(e)
	}
	return k.def, nil
}

// keys is the table of every configuration key, in the order config show and
// config init list them.
// The s3 keys are left out when backend's table has no S3 driver.
var keys = slices.DeleteFunc(slices.Concat(agentKeys, folderKeys(), otherKeys), func(k key) bool {
	return strings.HasPrefix(k.name, "s3.") && len(backend.Clients("s3")) == 0
})

// agentKeys are omp's folder and the agents to back up; folderKeys the
// other agents' folders, one for each of package store's stores.
var agentKeys = []key{
	{
		name:    "agent_dir",
		help:    "omp's agent folder; sessions are under <agent_dir>/sessions (default: $PI_CODING_AGENT_DIR, else $XDG_DATA_HOME/omp when it exists, as omp uses it, else ~/.omp/agent)",
		defFunc: defaultAgentDir,
		derived: true,
		path:    true,
	},
	{
		name:  "agents",
		help:  "the coding agents to back up: " + strings.Join(AgentNames(), ", ") + " (default: every one whose folder exists; omp when none does)",
		check: checkAgents,
	},
}

var otherKeys = []key{
	{
		name:    "remote",
		help:    "where backups go: " + backend.AcceptedForms() + " (a folder's parent must exist: a disk not mounted is refused, not filled)",
		defFunc: defaultRemote,
		derived: true,
		check:   checkRemote,
	},
	{
		name:    "state_dir",
		help:    "the agent's local state: how far each session file has been uploaded",
		defFunc: xdgDefault("XDG_STATE_HOME", ".local/state", "ompsync"),
		derived: true,
		path:    true,
	},
	{
		name:    "machine",
		help:    "this machine's name on the remote: 1-64 of A-Z a-z 0-9 . _ - (default: the host name)",
		defFunc: defaultMachine,
		derived: true,
		check:   checkMachine,
	},
	{
		name: "interval",
		help: "how long the agent gathers new lines before it uploads them",
		def:  "2s",
	},
	{
		name: "reconcile_interval",
		help: "how often the agent rescans agent_dir for changes it missed",
		def:  "60s",
	},
	{
		name:  "transfers",
		help:  "requests in flight at once: uploads, restore, verify and pull (a line with a long round trip needs many to fill it)",
		def:   DefaultTransfers,
		check: checkTransfers,
	},
	{
		name:  "include",
		help:  "globs (relative to agent_dir) a file must match to be backed up; empty means no restriction",
		check: checkGlobs,
	},
	{
		name:  "exclude",
		help:  "globs (relative to agent_dir) of files never to back up",
		check: checkGlobs,
	},
	{
		name:    "s3.client",
		help:    "the S3 library: " + clientHelp(),
		defFunc: func(*environ) (string, error) { return backend.Clients("s3")[0], nil },
		enum:    backend.Clients("s3"),
	},
	{
		name:  "s3.endpoint",
		help:  "URL of an S3-compatible server, e.g. https://minio.example.com:9000; empty means AWS",
		check: unlessEmpty(checkEndpoint),
	},
	{
		name: "s3.region",
		help: "the bucket's region, e.g. eu-west-1; empty leaves it to the S3 client (AWS_REGION and the like)",
	},
	{
		name: "s3.path_style",
		help: "address buckets as endpoint/bucket instead of bucket.endpoint (most self-hosted servers need true; an s3.endpoint that is an IP address or localhost always does, and defaults to it)",
		def:  "false",
		// Pinned false, it refused the endpoint 127.0.0.1 set later.
		derived: true,
	},
	{
		name:     "s3.ca_file",
		help:     "file of the certificate authorities (PEM) to trust for an https s3.endpoint with a private CA (default: $AWS_CA_BUNDLE)",
		defFunc:  func(e *environ) (string, error) { v, _ := e.defaultFrom("AWS_CA_BUNDLE"); return v, nil },
		derived:  true,
		path:     true,
		optional: true,
	},
	{
		name:   "s3.access_key_id",
		help:   "S3 access key id; empty means AWS_ACCESS_KEY_ID from the environment",
		redact: redactPartial,
	},
	{
		name:   "s3.secret_access_key",
		help:   "S3 secret key; empty means AWS_SECRET_ACCESS_KEY from the environment",
		redact: redactFull,
	},
	{
		name:   "s3.session_token",
		help:   "S3 session token of temporary credentials (STS), with the access key id and secret key; empty means AWS_SESSION_TOKEN from the environment when those come from there",
		redact: redactFull,
	},
	{
		name: "sync.pull",
		help: "also pull sessions other machines uploaded into agent_dir",
		def:  "false",
	},
	{
		name: "sync.pull_interval",
		help: "how often the agent looks for other machines' new uploads when sync.pull is on",
		def:  "30s",
	},
	{
		name:  "sync.include",
		help:  "globs (relative to agent_dir) a session must match to be pulled; empty means no restriction",
		check: checkGlobs,
	},
	{
		name:  "sync.exclude",
		help:  "globs (relative to agent_dir) of sessions never to pull",
		check: checkGlobs,
	},
	{
		name:    "projects.roots",
		help:    "folders searched (4 levels deep, hidden folders skipped, at most 20000 folders and 3s, cached for an hour) for git checkouts, so that a session from another machine is placed in this machine's checkout of the same repository (default: the home folder)",
		def:     "~",
		derived: true,
		path:    true,
	},
	{
		name:  "path_map",
		help:  "FROM=TO folder pairs (e.g. /Users/ana=/home/ana): a session from another machine recorded in FROM or below runs in the same folder under TO here, when no checkout of its repository and no same folder under this home is found (pull and restore; restore --path-map adds pairs)",
		check: checkPathMap,
	},
	{
		name:  "encryption.recipients",
		help:  "encrypt every object to these public keys: age1... (from 'ompsync keygen') or ssh-ed25519 AAAA...; empty with identity_file set means its own key",
		check: checkRecipients,
	},
	{
		name:     "encryption.identity_file",
		help:     "file of private keys (age identities, or an unencrypted ssh key) that restore, verify, pull and rekey decrypt with; mode 0600",
		path:     true,
		optional: true,
	},
	{
		name:     "encryption.passphrase_file",
		help:     "instead of keys, encrypt with the passphrase on this file's first line (mode 0600)",
		path:     true,
		optional: true,
	},
	{
		name: "compaction.idle",
		help: "the agent merges a session's small chunks into a few large ones once it has been idle this long",
		def:  "10m",
	},
	{
		name: "compaction.max_chunks",
		help: "the agent also compacts a busy session once it holds more than this many small chunks",
		def:  "64",
	},
	{
		name:     "retention.generations",
		help:     "how long superseded generations (older copies of a rewritten session) are kept; 0 keeps them forever",
		def:      "720h",
		optional: true,
	},
	{
		name:     "retention.deleted",
		help:     "how long the backup of a session deleted on this machine is kept; 0 keeps it forever",
		def:      "0",
		optional: true,
	},
	{
		name:  "search.cache_size",
		help:  "how much the search cache under state_dir/search may hold (the text of searched sessions), e.g. 500MB or 2GiB; 0 keeps nothing",
		def:   "1GiB",
		check: checkSize,
	},
	{
		name:  "verify.daily_read",
		help:  "how much of what this machine uploaded the agent reads back from the remote each day, every hash checked, going on each day where the last stopped, so all of it is read within (bytes backed up / this) days (2 GiB at 128MiB: 16 days); damage is a WARN and a damaged alert; 0 reads nothing",
		def:   "128MiB",
		check: checkSize,
	},
	{
		name: "mcp.redact",
		help: "ompsync mcp masks strings in what it returns that look like credentials (AWS access keys and the secrets beside them, GitHub tokens, sk- API keys, PEM private keys), counting them in each result, so a search does not paste a key into a new conversation",
		def:  "true",
	},
	{
		name:  "restore.max_merge_size",
		help:  "how much memory restore and pull may give the index that merges a session's copies that went on apart line by line: 192 bytes a line of every copy (twice where copies hold an entry in other bytes) and the longest line, never the copies themselves, which are read through (256MiB is about 1.4 million lines, two copies of some 350 MiB each), e.g. 1GiB; past it the session is not merged and the error says so",
		def:   "256MiB",
		check: checkMergeSize,
	},
	{
		name: "log.level",
		help: "least severe log messages shown: debug, info, warn or error",
		def:  "info",
		enum: []string{"debug", "info", "warn", "error"},
	},
	{
		name: "log.format",
		help: "log line format: text or json",
		def:  "text",
		enum: []string{"text", "json"},
	},
	{
		name:  "metrics.addr",
		help:  "host:port to serve Prometheus metrics on, e.g. 127.0.0.1:9464; empty means off",
		check: unlessEmpty(checkAddr),
	},
	{
		name:   "notify.url",
		help:   "a health-check URL (healthchecks.io, Uptime Kuma push, Cronitor): pinged after good passes, <url>/fail when the backup has been failing or behind longer than notify.grace; empty means off",
		check:  unlessEmpty(checkNotifyURL),
		redact: redactPartial, // the URL is the check's credential
	},
	{
		name: "notify.command",
		help: "a shell command run on failing, lagging, recovered and damaged events, with OMPSYNC_EVENT, OMPSYNC_MESSAGE and OMPSYNC_MACHINE set; empty means off",
	},
	{
		name: "notify.grace",
		help: "how long the backup may fail or fall behind before notify.url and notify.command are told",
		def:  "15m",
	},
	{
		name: "notify.ping_interval",
		help: "how often notify.url is pinged while the backup is healthy",
		def:  "1h",
	},
}

// clientHelp names the s3.client values and their libraries.
func clientHelp() string {
	var libs []string
	for _, b := range backend.Backends() {
		if b.Scheme == "s3" && b.Client != "" {
			libs = append(libs, b.Client+" ("+b.Library+")")
		}
	}
	return strings.Join(libs, " or ")
}

// EnvVar returns the environment variable for a key: OMPSYNC_ and the key
// upper-cased with dots turned into underscores (s3.client -> OMPSYNC_S3_CLIENT).
func EnvVar(key string) string {
	return "OMPSYNC_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// FlagName returns the name of the flag that sets a key: the key with dots
// and underscores turned into dashes (log.level -> log-level). Load binds
// every flag so named that it finds in LoadOptions.Flags.
func FlagName(key string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(key)
}

func lookupKey(name string) (key, bool) {
	for _, k := range keys {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

func checkRemote(v any) (any, error) {
	loc, err := backend.ParseURL(v.(string))
	if err != nil {
		return nil, err
	}
	return loc.String(), nil
}

func checkMachine(v any) (any, error) {
	s := v.(string)
	if !safename.Machine(s) {
		return nil, fmt.Errorf("%q is not a usable machine name; use %s", s, safename.MachineRule)
	}
	return s, nil
}

func checkGlobs(v any) (any, error) {
	for _, g := range v.([]string) {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("glob %q is malformed (check its [ ] brackets and \\ escapes)", g)
		}
		if strings.HasPrefix(g, "/") {
			return nil, fmt.Errorf("glob %q starts with /; globs are relative to agent_dir", g)
		}
	}
	return v, nil
}

// unlessEmpty is check for a text key whose empty value means off, which
// needs no check.
func unlessEmpty(check func(s string) (any, error)) func(any) (any, error) {
	return func(v any) (any, error) {
		if v.(string) == "" {
			return v, nil
		}
		return check(v.(string))
	}
}

func checkEndpoint(s string) (any, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an endpoint URL; write it like https://s3.example.com or http://127.0.0.1:9000", s)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%q holds credentials; put them in s3.access_key_id and s3.secret_access_key instead", u.Redacted())
	}
	return strings.TrimSuffix(s, "/"), nil
}

func checkRecipients(v any) (any, error) {
	for i, r := range v.([]string) {
		if _, _, err := crypt.ParseRecipient(r); err != nil {
			return nil, fmt.Errorf("item %d: %v", i+1, err)
		}
	}
	return v, nil
}

func checkNotifyURL(s string) (any, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL; write it like https://hc-ping.com/<uuid>", s)
	}
	return strings.TrimSuffix(s, "/"), nil
}

func checkAddr(s string) (any, error) {
	if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
		return nil, fmt.Errorf("%q is not host:port; write it like 127.0.0.1:9464 or :9464", s)
	}
	return s, nil
}

// AddFlags adds to fs a flag for each key named, called FlagName(key)
// (agent_dir: --agent-dir), by which Load finds it. Its default is the
// key's, for --help and the man pages to show; Load takes a flag's value
// only when it is given.
func AddFlags(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		k, ok := lookupKey(name)
		if !ok || k.redact != redactNone {
			// a secret on the command line shows up in ps and shell history
			panic("config.AddFlags: no flag for key " + name)
		}
		usage := fmt.Sprintf("%s [%s]", k.help, EnvVar(name))
		switch k.field(&Config{}).(type) {
		case *bool:
			fs.Bool(FlagName(name), k.def == "true", usage)
		case *[]string:
			fs.StringSlice(FlagName(name), nil, usage)
		default:
			fs.String(FlagName(name), k.def, usage)
		}
	}
}

// DefaultTransfers is measured on a shaped line (internal/testkit/bench/run.sh -phases
// line, docs/BENCHMARKS.md): enough requests in flight to fill 50 Mbit/s
// at 30 ms with sessions of a few tens of KB each.
const DefaultTransfers = "16"

// MaxTransfers bounds transfers: the S3 drivers keep this many idle
// connections per host, so every transfer reuses one.
const MaxTransfers = remote.IdleConnsPerHost

func checkTransfers(v any) (any, error) {
	if n := v.(int); n > MaxTransfers {
		return nil, fmt.Errorf("%d is more than the %d the S3 clients keep connections for; write a number from 1 to %d", n, MaxTransfers, MaxTransfers)
	}
	return v, nil
}

// checkSize accepts a number of bytes with an optional unit: B, KB, MB, GB,
// TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func checkSize(v any) (any, error) {
	if _, err := ParseSize(v.(string)); err != nil {
		return nil, err
	}
	return strings.TrimSpace(v.(string)), nil
}

// checkMergeSize is checkSize, above zero (restore's merges need room).
func checkMergeSize(v any) (any, error) {
	if n, err := ParseSize(v.(string)); err != nil || n == 0 {
		return nil, fmt.Errorf("%q is not a size above zero; write it like 256MiB or 1GiB", strings.TrimSpace(v.(string)))
	}
	return strings.TrimSpace(v.(string)), nil
}

// ParseSize reads a size as checkSize accepts it.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.TrimSpace(s[len(num):])
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}[strings.ToUpper(unit)]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(num, "+") || mult == 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size; write it like 500MB, 2GiB or 0", s)
	}
	return n * mult, nil
}
