package config

import (
	"strings"
	"testing"
)

// Bad config files beyond TestBadValues and TestUnknownKey: values of the
// wrong type, bytes that are not YAML text, and remote URLs that are not
// remotes. Each is one line naming the file (and the key and line where
// there is one), and never shows a secret.

const badSecret = "wJalrXUtnFEMI-bad-input-secret"

func loadFile(t *testing.T, body string) error {
	t.Helper()
	env, home := newEnv(t)
	env["OMPSYNC_CONFIG"] = writeConfig(t, home, body)
	_, err := Load(opts(env))
	return err
}

func checkLoadError(t *testing.T, body string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%q: loaded, want an error", body)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("%q: error is not one line: %q", body, msg)
	}
	if strings.Contains(msg, badSecret) {
		t.Errorf("%q: error shows the secret: %q", body, msg)
	}
	for _, w := range append(want, "config.yaml") {
		if !strings.Contains(msg, w) {
			t.Errorf("%q: error %q lacks %q", body, msg, w)
		}
	}
}

func TestWrongTypes(t *testing.T) {
	for _, tt := range []struct {
		body string
		want []string
	}{
		{"remote: 5\n", []string{"remote", ":1", "accepted forms"}},
		{"remote: {bucket: x}\n", []string{"remote", "not a mapping"}},
		{"remote: [s3://a, s3://b]\n", []string{"remote", "not a list"}},
		{"interval: true\n", []string{"interval", "not a duration"}},
		{"interval: [2s]\n", []string{"interval", "not a list"}},
		{"interval: 1e3\n", []string{"interval", "no unit"}},
		{"include: {a: b}\n", []string{"include", "not a mapping"}},
		{"include: [1, [2]]\n", []string{"include", "plain values"}},
		{"exclude: [{a: b}]\n", []string{"exclude", "plain values"}},
		{"s3: [a, b]\n", []string{"s3 holds keys", "s3.client"}},
		{"log: 5\n", []string{"log holds keys", "log.level"}},
		{"sync: true\n", []string{"sync holds keys"}},
		{"machine: [a]\n", []string{"machine", "not a list"}},
		{"s3:\n  path_style: [true]\n", []string{"s3.path_style", ":2"}},
		{"s3:\n  secret_access_key: [" + badSecret + "]\n", []string{"s3.secret_access_key"}},
		{"s3:\n  secret_access_key: {k: " + badSecret + "}\n", []string{"s3.secret_access_key"}},
		{"metrics: {addr: [a]}\n", []string{"metrics.addr"}},
	} {
		checkLoadError(t, tt.body, loadFile(t, tt.body), tt.want...)
	}
}

func TestNotYAMLText(t *testing.T) {
	for _, body := range []string{
		"remote: s3://b\xffb\n",           // not UTF-8
		"remote: \"s3://bucket\x00\"\n",   // NUL
		"\x00\x01\x02\xff\xfe\x28\xb5",    // binary
		"s3:\n\tclient: aws\n",            // a tab for indentation
		"*alias\n",                        // an unknown anchor
		"remote: [unclosed\n",             // syntax
		strings.Repeat("[", 10000) + "\n", // deep nesting
	} {
		checkLoadError(t, body, loadFile(t, body))
	}
}

func TestBadRemoteURLs(t *testing.T) {
	for _, u := range []string{
		"s3://", "s3:///prefix", "s3://bu", "s3://Bucket", "s3://bucket#frag", "s3://bucket?x=1",
		"s3://bucket/a/../b", "s3://bucket/a//b", "file:relative", "file://host/x", "file:///x?y", "http://example.com",
		"/mnt/backup", "bucket", "s3:bucket",
	} {
		body := "remote: " + u + "\n"
		checkLoadError(t, body, loadFile(t, body), "remote", ":1", "accepted forms")
	}
}

// Credentials written into the remote URL are refused, and the refusal
// does not repeat them (it goes to stderr and the service journal).
func TestRemoteURLWithCredentials(t *testing.T) {
	body := "remote: s3://AKIAIOSFODNN7EXAMPLE:" + badSecret + "@bucket/p\n"
	checkLoadError(t, body, loadFile(t, body), "remote", "credentials")
}

// A key set twice is refused with both lines, rather than the last one
// silently winning (an edit that left the old line behind).
func TestDuplicateKeys(t *testing.T) {
	for _, body := range []string{
		"remote: s3://aaa\nremote: s3://bbb\n",
		"remote: s3://aaa\nRemote: s3://bbb\n",
		"s3:\n  client: aws\ns3:\n  client: minio\n",
	} {
		checkLoadError(t, body, loadFile(t, body), ":2")
	}
}

// A bad secret value says why it is refused, without the value: the
// reason was dropped with it ("the value is not valid").
func TestBadSecretKeepsTheReason(t *testing.T) {
	const why = " is not an http(s) URL; write it like https://hc-ping.com/<uuid>"
	for _, v := range []string{"ftp://x/" + badSecret, "ftp://x/\"" + badSecret + "\t"} {
		env, _ := newEnv(t)
		env["OMPSYNC_NOTIFY_URL"] = v
		_, err := Load(opts(env))
		if want := "notify.url (env OMPSYNC_NOTIFY_URL): the value (not shown: a secret)" + why; err == nil || err.Error() != want {
			t.Errorf("%q: %v\nwant %s", v, err, want)
		}
	}
	// A secret short enough to be found in the reason's own words ("h" in
	// "http") is never cut out of them: the reason goes with the value.
	env, _ := newEnv(t)
	env["OMPSYNC_NOTIFY_URL"] = "h"
	if _, err := Load(opts(env)); err == nil || err.Error() != "notify.url (env OMPSYNC_NOTIFY_URL): the value is not valid (not shown: it is a secret)" {
		t.Errorf("a one-letter secret: %v", err)
	}
}
