package recall

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const (
		akid   = "AKIAIOSFODNN7EXAMPLE"
		secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		ghp    = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
		pat    = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
		sk     = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
		body   = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
	)
	in := `export AWS_ACCESS_KEY_ID=` + akid + `\nexport AWS_SECRET_ACCESS_KEY=` + secret + `\n` + ghp + " " + pat + " " + sk +
		`\n-----BEGIN RSA PRIVATE KEY-----\n` + body + `\n-----END RSA PRIVATE KEY-----\nsha256 ` + strings.Repeat("ab12", 16)
	out, n := Redact(in)
	for _, s := range []string{akid, secret, ghp, pat, sk, body, "BEGIN RSA"} {
		if strings.Contains(out, s) {
			t.Errorf("%q left in %q", s, out)
		}
	}
	if n != 6 || !strings.Contains(out, strings.Repeat("ab12", 16)) || !strings.Contains(out, "export AWS_SECRET_ACCESS_KEY="+Masked) {
		t.Errorf("%d masked: %q", n, out)
	}
	// A key's body line alone, as a search snippet holds it.
	if out, n := Redact(body); n != 1 || out != Masked {
		t.Errorf("a body line: %d, %q", n, out)
	}
	if out, n := Redact("nothing to hide here, a sketch of sk-8"); n != 0 || out != "nothing to hide here, a sketch of sk-8" {
		t.Errorf("plain text: %d %q", n, out)
	}
}
