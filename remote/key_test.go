package remote

import (
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "a/b", "v1/sessions/x/m/0000-0010.zst", "with space/ünï 名", ".hidden", "a/..b", "a/b.", strings.Repeat("k", 1024)} {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want ok", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "../a", "a\x00", "a\\b", "a\tb", "a\x7f", "\xff", strings.Repeat("k", 1025)} {
		if err := ValidateKey(k); err == nil {
			t.Errorf("ValidateKey(%q) = nil, want an error", k)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", "a/b", "a/b/", "sessions/ab", "a/.", "a/.."} {
		if err := ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v, want ok", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "a//", "../", "a/../b", "./", "a\x00", "a\\"} {
		if err := ValidatePrefix(p); err == nil {
			t.Errorf("ValidatePrefix(%q) = nil, want an error", p)
		}
	}
}

func TestS3ConfigHidesSecret(t *testing.T) {
	c := S3Config{Bucket: "b", AccessKeyID: "AKID", SecretAccessKey: "s3cr3t-value"}
	for _, s := range []string{c.String(), c.GoString(), c.LogValue().String()} {
		if strings.Contains(s, "s3cr3t-value") {
			t.Errorf("config text shows the secret: %s", s)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7070":  "http://127.0.0.1:7070",
		"https://s3.example.com": "https://s3.example.com",
		"s3.example.com:9000":    "https://s3.example.com:9000",
		"http://h:1/":            "http://h:1",
	} {
		u, err := S3Config{Endpoint: in}.EndpointURL()
		if err != nil || u.String() != want {
			t.Errorf("EndpointURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	for _, in := range []string{"ftp://h", "http://user:pw@h", "http://h/path", "http://h?q=1"} {
		if _, err := (S3Config{Endpoint: in}).EndpointURL(); err == nil {
			t.Errorf("EndpointURL(%q): no error", in)
		}
	}
}
