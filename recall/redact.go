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
// masked when it has both upper and lower case (a hex hash does not).
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

// mask replaces group 1 of each match of re, or the whole match where
// there is no group or it did not take part (so what an sk- key or an AWS
// secret follows is kept); with mixedOnly, only when that text has both
// upper and lower case, as a key does. It counts the masks in n.
func mask(text string, re *regexp.Regexp, mixedOnly bool, n *int) string {
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
		i, j := m[0], m[1]
		if len(m) > 2 && m[2] >= 0 {
			i, j = m[2], m[3]
		}
		if mixedOnly && !mixed(text[i:j]) {
			continue
		}
		*n++
		b.WriteString(text[last:i])
		b.WriteString(Masked)
		last = j
	}
	if b.Len() == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// mixed: k has upper and lower case letters, as a key does.
func mixed(k string) bool {
	return strings.ToLower(k) != k && strings.ToUpper(k) != k
}
