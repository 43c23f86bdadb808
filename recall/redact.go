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
	`|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}|\bsk-[A-Za-z0-9_-]{20,}`)

// awsSecret is a 40-character AWS secret key, masked only in a text that
// names an AWS key or a secret: alone it is any base64.
var awsSecret = regexp.MustCompile(`(?:^|[^A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`)

// Redact masks what looks like a credential in text and counts them.
func Redact(text string) (string, int) {
	n := 0
	hasAWS := strings.Contains(text, "AKIA") || strings.Contains(text, "ASIA") || strings.Contains(strings.ToLower(text), "secret")
	text = credentials.ReplaceAllStringFunc(text, func(string) string { n++; return Masked })
	if hasAWS {
		text = awsSecret.ReplaceAllStringFunc(text, func(s string) string {
			m := awsSecret.FindStringSubmatchIndex(s)
			// The 40 characters must mix cases and digits, as a key does.
			k := s[m[2]:m[3]]
			if strings.ToLower(k) == k || strings.ToUpper(k) == k {
				return s
			}
			n++
			return s[:m[2]] + Masked + s[m[3]:]
		})
	}
	return text, n
}
