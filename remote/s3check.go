package remote

import (
	"cmp"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// CheckS3Answers wraps an S3 driver's transport so that an answer no S3
// server gives, such as a web server's page, is a SetupError naming the
// endpoint instead of passing for "not found" or "no such bucket".
func CheckS3Answers(base http.RoundTripper) http.RoundTripper {
	return s3Checker{base}
}

type s3Checker struct{ base http.RoundTripper }

func (c s3Checker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	return DoS3Checked(req, resp, err)
}

// DoS3Checked is CheckS3Answers for a client that is a Do method (the aws
// SDK's).
func DoS3Checked(req *http.Request, resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		return resp, err
	}
	if err := checkS3Answer(req, resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// checkS3Answer: S3 answers with XML, or with an object's bytes. An HTML
// page never comes from S3, nor does an error that is not XML (but for a
// HEAD, which has no body), nor a listing that is not XML. 5xx and 429
// answers are left alone: a proxy's page during a server restart is an
// outage to wait out, not a wrong endpoint.
func checkS3Answer(req *http.Request, resp *http.Response) error {
	status := resp.StatusCode
	if status >= 500 || status == http.StatusTooManyRequests {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	isXML := mt == "application/xml" || mt == "text/xml"
	listing := req.Method == http.MethodGet && req.URL.Query().Has("list-type")
	switch {
	case strings.Contains(mt, "html"):
	case status >= 300 && status != http.StatusNotModified && req.Method != http.MethodHead && !isXML && resp.ContentLength != 0:
	case status < 300 && listing && !isXML:
	default:
		return nil
	}
	return &SetupError{fmt.Sprintf("%s://%s did not answer like an S3 server (HTTP %d, %s): check s3.endpoint",
		req.URL.Scheme, req.URL.Host, status, cmp.Or(mt, ct, "no content type"))}
}
