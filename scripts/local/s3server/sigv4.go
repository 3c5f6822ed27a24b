package s3server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Default key pair: the one NewS3Client and the local stack sign with.
const (
	DefaultAccessKeyID     = "local"
	DefaultSecretAccessKey = "local"
)

const (
	amzDateLayout   = "20060102T150405Z"
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	// maxClockSkew is how far a header-signed request's X-Amz-Date may be
	// from the server's clock (S3: RequestTimeTooSkewed past 15 minutes).
	maxClockSkew = 15 * time.Minute
)

// authError is a request the authenticator refuses: the S3 error it gets.
type authError struct {
	status        int
	code, message string
}

func signatureMismatch(detail string) *authError {
	msg := "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	if detail != "" {
		msg += " (local S3: " + detail + ")"
	}
	return &authError{http.StatusForbidden, "SignatureDoesNotMatch", msg}
}

func queryParamsError(msg string) *authError {
	return &authError{http.StatusBadRequest, "AuthorizationQueryParametersError", msg}
}

func headerMalformed(msg string) *authError {
	return &authError{http.StatusBadRequest, "AuthorizationHeaderMalformed", msg}
}

// authenticator verifies the AWS Signature Version 4 of every request, as
// S3 does, with the one key pair the server knows: it recomputes the
// signature with the AWS SDK's own signer over the canonical request (the
// method, the path as sent, the query, the values of the headers the
// request says it signed, and the payload hash) and compares.
type authenticator struct {
	creds  aws.Credentials
	region string
	signer *v4.Signer
	now    func() time.Time
}

func newAuthenticator(accessKeyID, secretAccessKey, region string) *authenticator {
	return &authenticator{
		creds:  aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey},
		region: region,
		// As the S3 client signs: the path is not escaped a second time;
		// presigned headers stay headers (those the client hoisted into the
		// query are in the query already).
		signer: v4.NewSigner(func(o *v4.SignerOptions) {
			o.DisableURIPathEscaping = true
			o.DisableHeaderHoisting = true
		}),
		now: time.Now,
	}
}

// verify authenticates r: a presigned URL (X-Amz-* query parameters,
// UNSIGNED-PAYLOAD) or an Authorization header. It returns nil when the
// signature is the server's key pair's over this very request; for a
// header-signed request whose payload hash is a SHA-256, it also makes
// r.Body check that hash (payloadCheck) as it is read.
func (a *authenticator) verify(r *http.Request) (*payloadCheck, *authError) {
	q := r.URL.Query()
	presigned := q.Has("X-Amz-Signature") || q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Credential")
	header := r.Header.Get("Authorization")
	switch {
	case presigned && header != "":
		return nil, &authError{http.StatusBadRequest, "InvalidArgument",
			"Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified"}
	case presigned:
		return nil, a.verifyPresigned(r, q)
	case header != "":
		return a.verifyHeader(r, header)
	}
	return nil, &authError{http.StatusForbidden, "AccessDenied", "Access Denied (local S3: the request is not signed; every request needs a SigV4 signature)"}
}

// verifyPresigned checks a presigned URL's signature: the canonical request
// over the method, path, query less X-Amz-Signature, the signed headers'
// values and UNSIGNED-PAYLOAD. (The expiry is checked before, by
// checkPresignExpiry.)
func (a *authenticator) verifyPresigned(r *http.Request, q url.Values) *authError {
	for _, p := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		if q.Get(p) == "" {
			return queryParamsError("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
		}
	}
	if alg := q.Get("X-Amz-Algorithm"); alg != sigV4Algorithm {
		return queryParamsError(`X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"`)
	}
	if e := a.checkScope(q.Get("X-Amz-Credential"), queryParamsError); e != nil {
		return e
	}
	if q.Has("X-Amz-Security-Token") {
		return &authError{http.StatusBadRequest, "InvalidToken", "The provided token is malformed or otherwise invalid. (local S3: its key pair has no session token)"}
	}
	signedAt, err := time.Parse(amzDateLayout, q.Get("X-Amz-Date"))
	if err != nil {
		return queryParamsError(`X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`)
	}
	names := q.Get("X-Amz-SignedHeaders")
	req, e := canonicalCopy(r, names)
	if e != nil {
		return e
	}
	rest := url.Values{}
	for k, v := range q {
		if k != "X-Amz-Signature" {
			rest[k] = v
		}
	}
	req.URL.RawQuery = rest.Encode()
	signed, _, err := a.signer.PresignHTTP(context.Background(), a.creds, req, unsignedPayload, "s3", a.region, signedAt)
	if err != nil {
		return signatureMismatch("cannot sign: " + err.Error())
	}
	u, err := url.Parse(signed)
	if err != nil {
		return signatureMismatch("cannot sign: " + err.Error())
	}
	if got := u.Query().Get("X-Amz-SignedHeaders"); got != names {
		return signatureMismatch("the signed headers " + names + " are not what the SDK's signer signs (" + got + ")")
	}
	return compareSignatures(u.Query().Get("X-Amz-Signature"), q.Get("X-Amz-Signature"))
}

// verifyHeader checks an Authorization header's signature: the canonical
// request over the method, path, query, the signed headers' values and
// X-Amz-Content-Sha256, the payload hash (a SHA-256, checked against the
// body as it is read, or UNSIGNED-PAYLOAD).
func (a *authenticator) verifyHeader(r *http.Request, header string) (*payloadCheck, *authError) {
	alg, params, _ := strings.Cut(header, " ")
	if alg != sigV4Algorithm {
		return nil, &authError{http.StatusBadRequest, "InvalidRequest",
			"The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256."}
	}
	fields := map[string]string{}
	for _, f := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	credential, names, signature := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if credential == "" || names == "" || signature == "" {
		return nil, headerMalformed("The authorization header is malformed; it must hold Credential, SignedHeaders and Signature.")
	}
	if e := a.checkScope(credential, headerMalformed); e != nil {
		return nil, e
	}
	if r.Header.Get("X-Amz-Security-Token") != "" {
		return nil, &authError{http.StatusBadRequest, "InvalidToken", "The provided token is malformed or otherwise invalid. (local S3: its key pair has no session token)"}
	}
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	var check *payloadCheck
	switch {
	case payloadHash == "":
		return nil, &authError{http.StatusBadRequest, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"}
	case payloadHash == unsignedPayload:
	case strings.HasPrefix(payloadHash, "STREAMING-"):
		// aws-chunked bodies carry a signature per chunk (or a trailer);
		// the SDK sends them only over https, never to this http server.
		return nil, &authError{http.StatusNotImplemented, "NotImplemented",
			"A header you provided implies functionality that is not implemented. (local S3: streaming payloads (" + payloadHash + ") are not taken: send UNSIGNED-PAYLOAD or the body's SHA-256)"}
	default:
		want, err := hex.DecodeString(payloadHash)
		if err != nil || len(want) != sha256.Size {
			return nil, &authError{http.StatusBadRequest, "InvalidArgument",
				"x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER or a valid sha256 value."}
		}
		check = &payloadCheck{want: want}
	}
	signedAt, err := time.Parse(amzDateLayout, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return nil, &authError{http.StatusForbidden, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header (local S3: x-amz-date, yyyyMMdd'T'HHmmss'Z')"}
	}
	if skew := a.now().Sub(signedAt); skew > maxClockSkew || skew < -maxClockSkew {
		return nil, &authError{http.StatusForbidden, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large."}
	}
	req, e := canonicalCopy(r, names)
	if e != nil {
		return nil, e
	}
	req.URL.RawQuery = r.URL.RawQuery
	if err := a.signer.SignHTTP(context.Background(), a.creds, req, payloadHash, "s3", a.region, signedAt); err != nil {
		return nil, signatureMismatch("cannot sign: " + err.Error())
	}
	mine := map[string]string{}
	_, minefields, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	for _, f := range strings.Split(minefields, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		mine[k] = v
	}
	if mine["SignedHeaders"] != names {
		return nil, signatureMismatch("the signed headers " + names + " are not what the SDK's signer signs (" + mine["SignedHeaders"] + ")")
	}
	if e := compareSignatures(mine["Signature"], signature); e != nil {
		return nil, e
	}
	if check != nil {
		check.body = r.Body
		r.Body = check
	}
	return check, nil
}

// checkScope checks a credential "<key id>/<yyyymmdd>/<region>/s3/aws4_request":
// the server's key id, its region, the s3 service. (A date that is not the
// request's is caught by the signature, which covers the scope.)
func (a *authenticator) checkScope(credential string, malformed func(string) *authError) *authError {
	parts := strings.Split(credential, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || len(parts[1]) != 8 {
		return malformed("Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	if subtle.ConstantTimeCompare([]byte(parts[0]), []byte(a.creds.AccessKeyID)) != 1 {
		return &authError{http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."}
	}
	if parts[2] != a.region {
		return malformed("The authorization header is malformed; the region '" + parts[2] + "' is wrong; expecting '" + a.region + "'")
	}
	if parts[3] != "s3" {
		return malformed("Error parsing the X-Amz-Credential parameter; incorrect service \"" + parts[3] + "\". This endpoint belongs to \"s3\".")
	}
	return nil
}

// canonicalCopy is a request with r's method, host and path as sent, and
// exactly the headers names lists (with r's values): what the client's
// signer saw. A listed header that r does not carry is a mismatch, an
// x-amz-* header that names does not list is refused, as on S3.
func canonicalCopy(r *http.Request, names string) (*http.Request, *authError) {
	req := &http.Request{
		Method: r.Method,
		Host:   r.Host,
		// The path exactly as sent: the canonical URI is not re-escaped.
		URL:    &url.URL{Scheme: "http", Opaque: "//" + r.Host + r.URL.EscapedPath()},
		Header: http.Header{},
	}
	listed := map[string]bool{}
	for _, name := range strings.Split(names, ";") {
		listed[name] = true
		switch {
		case name == "":
			return nil, signatureMismatch("empty signed header name in " + names)
		case name != strings.ToLower(name):
			return nil, signatureMismatch("signed header names are lower case: " + name)
		case name == "host":
		case name == "content-length":
			if r.ContentLength <= 0 {
				return nil, signatureMismatch("the signed header content-length is missing")
			}
			req.ContentLength = r.ContentLength
		default:
			values, ok := r.Header[http.CanonicalHeaderKey(name)]
			if !ok {
				return nil, signatureMismatch("the signed header " + name + " is missing")
			}
			req.Header[http.CanonicalHeaderKey(name)] = values
		}
	}
	// S3 takes no x-amz-* header the signature does not cover (an unsigned
	// X-Amz-Copy-Source would turn a presigned PUT into a copy of any key).
	var unsigned []string
	for name := range r.Header {
		if lower := strings.ToLower(name); strings.HasPrefix(lower, "x-amz-") && !listed[lower] {
			unsigned = append(unsigned, lower)
		}
	}
	if len(unsigned) > 0 {
		slices.Sort(unsigned)
		return nil, &authError{http.StatusForbidden, "AccessDenied",
			"There were headers present in the request which were not signed (local S3: " + strings.Join(unsigned, ", ") + ")"}
	}
	return req, nil
}

func compareSignatures(mine, theirs string) *authError {
	if mine == "" || subtle.ConstantTimeCompare([]byte(mine), []byte(theirs)) != 1 {
		return signatureMismatch("")
	}
	return nil
}

// errContentSHA256Mismatch is what a body whose SHA-256 is not its
// X-Amz-Content-Sha256 reads as at its end; the middleware answers it with
// S3's 400 XAmzContentSHA256Mismatch.
var errContentSHA256Mismatch = errors.New("the provided 'x-amz-content-sha256' header does not match what was computed")

// payloadCheck is a header-signed request's body: it hashes what is read
// and, at the end, fails the read when the hash is not the one signed, so
// that nothing of a body that is not the signed one is stored.
type payloadCheck struct {
	body     io.ReadCloser
	want     []byte
	h        hash.Hash
	mismatch bool
}

func (p *payloadCheck) Read(b []byte) (int, error) {
	if p.h == nil {
		p.h = sha256.New()
	}
	n, err := p.body.Read(b)
	p.h.Write(b[:n])
	if errors.Is(err, io.EOF) && subtle.ConstantTimeCompare(p.h.Sum(nil), p.want) != 1 {
		p.mismatch = true
		return n, errContentSHA256Mismatch
	}
	return n, err
}

func (p *payloadCheck) Close() error { return p.body.Close() }

// failed reports whether the body turned out not to be the signed one.
func (p *payloadCheck) failed() bool { return p != nil && p.mismatch }
