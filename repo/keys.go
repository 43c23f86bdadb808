// Package repo holds the layout of an ompsync repository on a remote: object
// keys, the chunk and metadata encodings, and the per-machine catalog. It is
// the promise documented in docs/FORMAT.md; change it only with a new
// format version.
package repo

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ompsync/ompsync/safename"
)

// FormatVersion is the repository format this ompsync reads and writes,
// the only one (docs/FORMAT.md): a generation's first chunk carries its
// meta, so a new session costs one PUT. Format 1, which put the meta as
// an object of its own, was written only by development builds before
// 0.1.0 and is refused. The "v1/" folder names the key layout.
const FormatVersion = 2

const (
	root = "v1/"
	// MarkerKey is the plaintext object that says what the repository is.
	MarkerKey = "ompsync.json"
	// SessionStream names the stream of a session file itself.
	SessionStream = "session"
	artifactDir   = "artifacts/"
)

// SessionsPrefix is the prefix of every session's objects; listing it with a
// "/" delimiter yields one common prefix per session id.
func SessionsPrefix() string { return root + "sessions/" }

// SessionPrefix holds every object of one session, from every machine.
func SessionPrefix(id string) string { return root + "sessions/" + id + "/" }

// MachinesPrefix lists machines with a "/" delimiter.
func MachinesPrefix() string { return root + "machines/" }

// CatalogKey is the object that lists what a machine holds.
func CatalogKey(machine string) string { return root + "machines/" + machine + "/catalog" }

// RecentKey holds the catalog entries that changed since the catalog was
// last written whole, so that an active machine rewrites a small object
// every interval rather than its whole catalog.
func RecentKey(machine string) string { return root + "machines/" + machine + "/recent" }

// BlobKey is the content-addressed key of one of omp's blobs.
func BlobKey(name string) string { return root + "blobs/" + name }

// ArtifactStream names the stream of a file in a session's artifact folder,
// by its slash-separated path inside that folder.
func ArtifactStream(rel string) string { return artifactDir + url.PathEscape(rel) }

// ArtifactPath is the inverse of ArtifactStream.
func ArtifactPath(stream string) (string, bool) {
	esc, ok := strings.CutPrefix(stream, artifactDir)
	if !ok || esc == "" || strings.Contains(esc, "/") {
		return "", false
	}
	rel, err := url.PathUnescape(esc)
	if err != nil || !safename.RelPath(rel) {
		return "", false
	}
	return rel, true
}

// Stream identifies the byte history of one file on one machine.
type Stream struct {
	SessionID string
	Machine   string
	Name      string // SessionStream or ArtifactStream(rel)
}

// Prefix is the folder of all the stream's generations.
func (s Stream) Prefix() string {
	return SessionPrefix(s.SessionID) + s.Machine + "/" + s.Name + "/"
}

// GenPrefix is the folder of one generation.
func (s Stream) GenPrefix(gen string) string { return s.Prefix() + gen + "/" }

// MetaKey is the generation's replaceable metadata object.
func (s Stream) MetaKey(gen string) string { return s.GenPrefix(gen) + "meta" }

// HeadKey holds the current title slot when it differs from the first chunk's.
func (s Stream) HeadKey(gen string) string { return s.GenPrefix(gen) + "head" }

// ChunkKey names the immutable object holding bytes [start, end).
func (s Stream) ChunkKey(gen string, start, end int64) string {
	return s.GenPrefix(gen) + ChunkName(start, end)
}

// ChunkName is "<start>-<end>", 16 hex digits each, so names sort by offset.
func ChunkName(start, end int64) string { return fmt.Sprintf("%016x-%016x", start, end) }

// ParseChunkName is the inverse of ChunkName.
func ParseChunkName(name string) (start, end int64, ok bool) {
	a, b, found := strings.Cut(name, "-")
	if !found || !ValidGeneration(a) || !ValidGeneration(b) {
		return 0, 0, false // 16 lower-case hex digits each, as written
	}
	s, err1 := strconv.ParseUint(a, 16, 63)
	e, err2 := strconv.ParseUint(b, 16, 63)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return int64(s), int64(e), true
}

// ObjectRef is a parsed key under SessionsPrefix.
type ObjectRef struct {
	Stream     Stream
	Generation string
	// Object is "meta", "head" or a chunk name.
	Object     string
	Start, End int64 // set for chunks
}

// ParseSessionKey parses "v1/sessions/<id>/<machine>/<stream>/<gen>/<object>",
// refusing anything that is not exactly that shape with safe segments.
func ParseSessionKey(key string) (ObjectRef, error) {
	rest, ok := strings.CutPrefix(key, SessionsPrefix())
	if !ok {
		return ObjectRef{}, fmt.Errorf("key %q is not under %s", key, SessionsPrefix())
	}
	parts := strings.Split(rest, "/")
	var ref ObjectRef
	var tail []string
	switch {
	case len(parts) == 5 && parts[2] == SessionStream:
		ref.Stream.Name, tail = SessionStream, parts[3:]
	case len(parts) == 6 && parts[2]+"/" == artifactDir:
		ref.Stream.Name, tail = artifactDir+parts[3], parts[4:]
		if _, ok := ArtifactPath(ref.Stream.Name); !ok {
			return ObjectRef{}, fmt.Errorf("key %q: unsafe artifact path", key)
		}
	default:
		return ObjectRef{}, fmt.Errorf("key %q: not a session object", key)
	}
	ref.Stream.SessionID, ref.Stream.Machine = parts[0], parts[1]
	ref.Generation, ref.Object = tail[0], tail[1]
	if !safename.SessionID(ref.Stream.SessionID) {
		return ObjectRef{}, fmt.Errorf("key %q: unsafe session id", key)
	}
	if !safename.Machine(ref.Stream.Machine) {
		return ObjectRef{}, fmt.Errorf("key %q: unsafe machine name", key)
	}
	if !ValidGeneration(ref.Generation) {
		return ObjectRef{}, fmt.Errorf("key %q: bad generation", key)
	}
	switch ref.Object {
	case "meta", "head":
	default:
		s, e, ok := ParseChunkName(ref.Object)
		if !ok {
			return ObjectRef{}, fmt.Errorf("key %q: unknown object", key)
		}
		ref.Start, ref.End = s, e
	}
	return ref, nil
}

// BlobName reports whether name is a blob's name: the SHA-256 of its
// content, 64 lower-case hex digits.
func BlobName(name string) bool { return lowerHex(name, 64, 64) }

// BlobLink splits another name of a blob, "<sha256>.<ext>" (omp's hard
// link for image viewers), into the blob's name and the extension: 1-8 of
// a-z 0-9.
func BlobLink(name string) (blob, ext string, ok bool) {
	blob, ext, ok = strings.Cut(name, ".")
	if !ok || !BlobName(blob) || ext == "" || len(ext) > 8 ||
		strings.ContainsFunc(ext, func(c rune) bool { return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') }) {
		return "", "", false
	}
	return blob, ext, true
}

// NewGeneration names a generation by its start time, so that names sort in
// the order the generations began on one machine.
func NewGeneration(unixNano int64) string { return fmt.Sprintf("%016x", unixNano) }

// GenerationTime is when a generation began, NewGeneration read back (the
// writing machine's clock); zero for a name that is not one.
func GenerationTime(name string) time.Time {
	n, err := strconv.ParseUint(name, 16, 63)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// ValidGeneration: 16 lower-case hex digits.
func ValidGeneration(g string) bool { return lowerHex(g, 16, 16) }

// lowerHex reports whether s is min to max lower-case hex digits: the
// spelling of every name ompsync makes of a hash, a time or a random id.
func lowerHex(s string, min, max int) bool {
	return len(s) >= min && len(s) <= max && !strings.ContainsFunc(s, func(c rune) bool { return !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') })
}

// rawPathMark starts a recorded path whose bytes are not UTF-8, which a
// JSON string cannot carry. NUL is in no real path, so no other path reads
// as marked, and a reader that predates the mark refuses such a path as
// unsafe instead of restoring it under a wrong name.
const rawPathMark = "\x00"

// EncodePath returns p as metadata records it: p itself when it is UTF-8,
// else the mark and p with every byte outside printable ASCII, and '%',
// escaped as %XX.
func EncodePath(p string) string {
	if utf8.ValidString(p) && !strings.HasPrefix(p, rawPathMark) {
		return p
	}
	const hex = "0123456789ABCDEF"
	b := []byte(rawPathMark)
	for i := 0; i < len(p); i++ {
		if c := p[i]; c > ' ' && c < 0x7f && c != '%' {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

// DecodePath reverses EncodePath. A marked path that does not decode is
// returned as recorded, which safename.RelPath refuses (it holds NUL).
func DecodePath(s string) string {
	rest, ok := strings.CutPrefix(s, rawPathMark)
	if !ok {
		return s
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return s
	}
	return p
}
