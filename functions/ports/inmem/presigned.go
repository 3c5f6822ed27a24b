package inmem

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// The query parameters of a presigned GET of Blobs.
const (
	presignExpires   = "X-Inmem-Expires"   // Unix seconds past which the URL is refused
	presignSignature = "X-Inmem-Signature" // HMAC-SHA256 of the method, the path and the rest of the query
)

// PresignGet returns a URL that GETs key without credentials until ttl
// passes (served by ServeHTTP, under BaseURL). As S3 does, the store
// refuses it once expired, and when anything of it was changed: its path
// (another key), its query, its method.
func (b *Blobs) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	u := &url.URL{Scheme: "inmem", Host: b.Bucket(), Path: "/" + key}
	if b.BaseURL != "" {
		base, err := url.Parse(b.BaseURL)
		if err != nil {
			return "", fmt.Errorf("presign get %s: BaseURL: %w", key, err)
		}
		u = base
		u.Path = strings.TrimSuffix(base.Path, "/") + "/" + b.Bucket() + "/" + key
	}
	q := url.Values{presignExpires: {strconv.FormatInt(time.Now().Add(ttl).Unix(), 10)}}
	q.Set(presignSignature, b.signature(http.MethodGet, u.Path, q))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// signature signs a request: its method, its path (decoded) and its query
// less the signature.
func (b *Blobs) signature(method, path string, q url.Values) string {
	b.mu.Lock()
	if b.signKey == nil {
		b.signKey = make([]byte, 32)
		rand.Read(b.signKey)
	}
	key := b.signKey
	b.mu.Unlock()
	rest := url.Values{}
	for k, v := range q {
		if k != presignSignature {
			rest[k] = v
		}
	}
	mac := hmac.New(sha256.New, key)
	io.WriteString(mac, method+"\n"+path+"\n"+rest.Encode())
	return hex.EncodeToString(mac.Sum(nil))
}

// ServeHTTP serves the presigned GETs of PresignGet, path-style
// (/bucket/key, the store served at the root of BaseURL), refusing what S3 refuses: 403 AccessDenied "Request has
// expired" past the expiry (checked first), 403 SignatureDoesNotMatch for
// a URL changed in any way or another method, 400 InvalidArgument for a
// request that also carries an Authorization header, 403 AccessDenied for
// one not presigned; 404 NoSuchKey for an object that is gone.
func (b *Blobs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has(presignSignature) {
		writeS3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
		return
	}
	if r.Header.Get("Authorization") != "" {
		writeS3Error(w, http.StatusBadRequest, "InvalidArgument", "Only one auth mechanism allowed")
		return
	}
	expires, err := strconv.ParseInt(q.Get(presignExpires), 10, 64)
	if err != nil {
		writeS3Error(w, http.StatusForbidden, "AccessDenied", "Query-string authentication requires "+presignExpires)
		return
	}
	if time.Now().Unix() > expires {
		writeS3Error(w, http.StatusForbidden, "AccessDenied", "Request has expired")
		return
	}
	if !hmac.Equal([]byte(b.signature(r.Method, r.URL.Path, q)), []byte(q.Get(presignSignature))) {
		writeS3Error(w, http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
		return
	}
	key, ok := strings.CutPrefix(r.URL.Path, "/"+b.Bucket()+"/")
	if !ok { // signed, but not under BaseURL/bucket/ (the store served under a path)
		writeS3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist.")
		return
	}
	obj, err := b.Open(r.Context(), key, "")
	if errors.Is(err, blob.ErrNotFound) {
		writeS3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	if err != nil {
		writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	defer obj.Body.Close()
	w.Header().Set("Content-Length", strconv.FormatInt(obj.Size, 10))
	w.Header().Set("ETag", obj.ETag)
	w.WriteHeader(http.StatusOK)
	io.Copy(w, obj.Body)
}

// writeS3Error answers an S3 error document.
func writeS3Error(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, message)
}
