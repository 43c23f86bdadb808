package restore

import (
	"maps"
	"regexp"
	"strings"
	"testing"
)

// blobRefs finds what the regular expression it replaces finds.
func TestBlobRefsLikeRegexp(t *testing.T) {
	re := regexp.MustCompile(`blob:sha256:([0-9a-f]{64})`)
	h := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{
		"",
		"no reference at all",
		`{"image":"blob:sha256:` + h + `"}`,
		"blob:sha256:" + h + "blob:sha256:" + h[:63] + "A",
		"blob:sha256:blob:sha256:" + h + "ff",
		"blob:sha256:" + h[:63],
		"blob:sha256:" + strings.ToUpper(h),
		"xblob:sha256:" + h + "\nblob:sha256:" + strings.Repeat("f", 64),
		"blob:sha256:" + h[:32] + "blob:sha256:" + h,
	} {
		sameAsRegexp(t, re, s)
	}
}

// sameAsRegexp checks that blobRefs finds in s what the regular
// expression does.
func sameAsRegexp(t *testing.T, re *regexp.Regexp, s string) {
	t.Helper()
	want := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		want[m[1]] = true
	}
	got := map[string]bool{}
	blobRefs([]byte(s), got)
	if !maps.Equal(got, want) {
		t.Errorf("%q: %v, want %v", s, got, want)
	}
}

func FuzzBlobRefs(f *testing.F) {
	f.Add("blob:sha256:" + strings.Repeat("ab", 32))
	re := regexp.MustCompile(`blob:sha256:([0-9a-f]{64})`)
	f.Fuzz(func(t *testing.T, s string) { sameAsRegexp(t, re, s) })
}
