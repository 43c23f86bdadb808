// Package service runs the ompsync agent under the user's service manager:
// systemd on Linux, launchd on macOS. It renders the unit and plist from the
// templates that also produce the files shipped in deploy/, installs and
// removes them, reports their status, and lets the agent tell systemd when it
// is ready, reloading or stopping.
package service

import (
	"bytes"
	"embed"
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"
)

const (
	// UnitName is the systemd user unit.
	UnitName = "ompsync.service"
	// Label is the launchd job label, also the plist's base name.
	Label = "io.github.ompsync.agent"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

// templates is parsed once; it is read-only after init.
var templates = template.Must(template.New("").
	Funcs(template.FuncMap{"xml": xmlText}).
	ParseFS(templateFS, "templates/*.tmpl"))

// Options describe the agent the service manager should run.
type Options struct {
	// Binary is the absolute path of the ompsync executable.
	Binary string
	// ConfigFile, when set, is passed to the agent as --config. It must be
	// absolute: the service manager does not start in the user's directory.
	ConfigFile string
	// Home is the user's home directory, where the unit or plist and the
	// launchd log live.
	Home string
	// UID selects the launchd domain, gui/<UID>.
	UID int
	// User is the login name, shown in the loginctl enable-linger hint.
	User string
}

// Args is the agent's command line: binary, "agent", and the config file.
func (o Options) Args() []string {
	args := []string{o.Binary, "agent"}
	if o.ConfigFile != "" {
		args = append(args, "--config", o.ConfigFile)
	}
	return args
}

// LogPath is where launchd sends the agent's output.
func (o Options) LogPath() string {
	return filepath.Join(o.Home, "Library", "Logs", "ompsync.log")
}

func (o Options) validate(needHome bool) error {
	if !filepath.IsAbs(o.Binary) {
		return fmt.Errorf("binary path %q is not absolute", o.Binary)
	}
	if o.ConfigFile != "" && !filepath.IsAbs(o.ConfigFile) {
		return fmt.Errorf("config file path %q is not absolute", o.ConfigFile)
	}
	if needHome && !filepath.IsAbs(o.Home) {
		return fmt.Errorf("home directory %q is not absolute", o.Home)
	}
	for _, s := range []string{o.Binary, o.ConfigFile, o.Home} {
		if err := checkText(s); err != nil {
			return err
		}
	}
	return nil
}

// checkText rejects what neither a unit file nor a plist can carry: unit
// files are UTF-8 lines, and XML 1.0 has no control characters (encoding/xml
// would silently turn them into U+FFFD).
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("path %q is not valid UTF-8", s)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return fmt.Errorf("path %q contains a control character", s)
	}
	return nil
}

// Unit renders the systemd user unit (ompsync.service).
func Unit(o Options) ([]byte, error) {
	return renderUnit(o, false)
}

func renderUnit(o Options, system bool) ([]byte, error) {
	if err := o.validate(false); err != nil {
		return nil, fmt.Errorf("systemd unit: %w", err)
	}
	// systemd runs the executable path as written, with specifiers but no
	// $VARIABLE expansion, and refuses one with quotes or backslashes.
	if strings.ContainsAny(o.Binary, `"'\`) {
		return nil, fmt.Errorf("systemd unit: systemd cannot run a binary whose path contains quotes or backslashes: %q", o.Binary)
	}
	args := o.Args()
	for i, a := range args {
		args[i] = execWord(a, i > 0)
	}
	data := struct {
		System    bool
		ExecStart string
	}{system, strings.Join(args, " ")}
	return render("ompsync.service.tmpl", data)
}

// Plist renders the launchd agent (io.github.ompsync.agent.plist).
func Plist(o Options) ([]byte, error) {
	if err := o.validate(true); err != nil {
		return nil, fmt.Errorf("launchd plist: %w", err)
	}
	data := struct {
		Label   string
		Args    []string
		LogPath string
	}{Label, o.Args(), o.LogPath()}
	return render("ompsync.plist.tmpl", data)
}

func render(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// execWord quotes one word of an ExecStart= line so that systemd hands the
// agent exactly s. systemd expands %-specifiers everywhere, so % is doubled;
// it expands $VARIABLES in the arguments (not in the executable path), so
// there $ is doubled too. Backslash and double quote are C-escaped inside
// double quotes.
func execWord(s string, arg bool) string {
	var b strings.Builder
	quote := s == ""
	for _, r := range s {
		switch {
		case r == '%':
			b.WriteString("%%")
		case r == '$' && arg:
			b.WriteString("$$")
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
			quote = true
		default:
			if !plainRune(r) {
				quote = true
			}
			b.WriteRune(r)
		}
	}
	if quote {
		return `"` + b.String() + `"`
	}
	return b.String()
}

// plainRune reports whether r is safe unquoted in an ExecStart= word.
func plainRune(r rune) bool {
	return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) || strings.ContainsRune("/._-+,:=@", r)
}

// xmlText escapes s for XML character data.
func xmlText(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}
