package recall

import (
	"regexp"
	"strings"
)

// Masked replaces each credential Redact finds.
const Masked = "[REDACTED]"

// credentials look like secrets: a PEM private key (to its END line, or
// to the end of the text when cut short), AWS access key ids, GitHub
// tokens, sk- API keys.
var credentials = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z ]*PRIVATE KEY-----|$)` +
	`|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}` +
	// sk- begins a word, or follows an escaped newline or tab in JSON.
	`|(?:^|[^A-Za-z0-9_-]|\\[nrt])(sk-[A-Za-z0-9_-]{20,})`)

// keyBody is a line of a PEM key's body or another long base64 secret,
// masked when it mixes cases and digits (a hex hash does not).
var keyBody = regexp.MustCompile(`[A-Za-z0-9+/]{60,}={0,2}`)

// awsSecret is a 40-character AWS secret key, masked only in a text that
// names an AWS key or a secret: alone it is any base64.
var awsSecret = regexp.MustCompile(`(?:^|[^A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`)

// Redact masks what looks like a credential in text and counts them.
func Redact(text string) (string, int) {
	n := 0
	hasAWS := strings.Contains(text, "AKIA") || strings.Contains(text, "ASIA") || strings.Contains(strings.ToLower(text), "secret")
	text = mask(text, credentials, false, &n)
	text = mask(text, keyBody, true, &n)
	if hasAWS {
		text = mask(text, awsSecret, true, &n)
	}
	return text, n
}

// mask replaces what each match of re holds in its group (all of it when
// the group is unset: what an sk- key or an AWS secret follows is kept),
// when that mixes cases and digits as a key does or mixed is not asked,
// and counts the masks in n.
func mask(text string, re *regexp.Regexp, mixedOnly bool, n *int) string {
	return re.ReplaceAllStringFunc(text, func(s string) string {
		m := re.FindStringSubmatchIndex(s)
		i, j := 0, len(s)
		if len(m) > 2 && m[2] >= 0 {
			i, j = m[2], m[3]
		}
		if mixedOnly && !mixed(s[i:j]) {
			return s
		}
		*n++
		return s[:i] + Masked + s[j:]
	})
}

// mixed: k has upper and lower case letters, as a key does.
func mixed(k string) bool {
	return strings.ToLower(k) != k && strings.ToUpper(k) != k
}
