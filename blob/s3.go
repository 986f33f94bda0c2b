package blob

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 defaults and limits.
const (
	DefaultS3PartSize    = 8 << 20 // bytes per multipart part and per in-memory buffer
	DefaultS3Concurrency = 4       // parts in flight
	MinS3PartSize        = 5 << 20 // S3's minimum part size
	MaxPresignTTL        = 7 * 24 * time.Hour

	// MetaSHA256 is the user-metadata name (x-amz-meta-sha256) holding the
	// lowercase hex SHA-256 of the body.
	MetaSHA256 = "sha256"

	stagingDir     = ".staging/" // under Prefix; caller keys never start with "."
	probeDir       = ".probe/"
	maxCopyObject  = 5 << 30 // S3's CopyObject limit; above it copy in parts
	copyPartSize   = 1 << 30
	cleanupTimeout = 30 * time.Second
)

// S3Config configures NewS3.
type S3Config struct {
	Bucket string
	// Endpoint is the S3 API base URL, e.g. "http://127.0.0.1:7070"; empty
	// means AWS (resolved from Region).
	Endpoint string
	// Region defaults to the SDK's resolution (AWS_REGION, shared config),
	// then "us-east-1".
	Region string
	// Prefix is prepended to every key; a "/" is appended when missing.
	Prefix    string
	PathStyle bool
	// PublicEndpoint, when set, is the base URL presigned links are minted
	// for (the host clients reach, e.g. through a reverse proxy that passes
	// the Host header through unchanged). Other requests use Endpoint.
	PublicEndpoint string
	// PartSize (default 8 MiB, at least 5 MiB) and Concurrency (default 4)
	// bound the memory one Put holds: about (Concurrency+1) × PartSize of
	// heap (40 MiB with the defaults), whatever the body size; the part
	// buffers are reused across Puts.
	PartSize    int64
	Concurrency int
	// Credentials; nil means the SDK's default chain.
	Credentials aws.CredentialsProvider
}

// S3 stores blobs in an S3-compatible bucket and hands them out as
// presigned GET links.
//
// A body that fits in one part is sent with a single PutObject, which
// carries its SHA-256 as x-amz-meta-sha256. A larger body is streamed with
// a multipart upload to a private staging key (Prefix + ".staging/…"),
// because S3 metadata must be fixed when an upload starts, before the
// digest is known. Once the upload completes the object is copied server
// side to its key with the digest as metadata, and the staging object is
// deleted. Either way the key only ever changes through one atomic S3
// operation (PutObject or CopyObject), so readers never see a half-written
// or unverifiable object, and a failed upload leaves nothing under the key.
// A crash can leave a staging object or an unfinished multipart upload
// behind; Sweep removes them (a bucket lifecycle rule on ".staging/" and
// on incomplete uploads does the same job).
type S3 struct {
	cfg      S3Config
	prefix   string
	client   *s3.Client
	presign  *s3.PresignClient
	partSize int64
	// parts are part buffers kept between uploads (at most Concurrency).
	parts chan []byte
	now   func() time.Time

	// Server-side copy limits, lowered in tests.
	maxCopyObject, copyPartSize int64

	bucketSeen atomic.Int64 // unix nanos when HeadBucket last succeeded
}

// bucketRecheck is how long a successful HeadBucket vouches for the bucket
// when Stat needs to tell a missing object from a missing bucket.
const bucketRecheck = time.Minute

var _ Store = (*S3)(nil)

// NewS3 builds the client. It does not contact the server: call
// CheckBucket (or CreateBucket) to find configuration errors at start.
func NewS3(ctx context.Context, c S3Config) (*S3, error) {
	if c.Bucket == "" {
		return nil, errors.New("blob: S3 bucket is empty")
	}
	prefix := c.Prefix
	if prefix != "" {
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if err := ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, fmt.Errorf("blob: S3 prefix %q: %w", c.Prefix, err)
		}
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultS3PartSize
	}
	if c.PartSize < MinS3PartSize {
		return nil, fmt.Errorf("blob: S3 part size %d is below the minimum %d", c.PartSize, MinS3PartSize)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultS3Concurrency
	}
	for _, e := range []string{c.Endpoint, c.PublicEndpoint} {
		if e == "" {
			continue
		}
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("blob: S3 endpoint %q must be an absolute http(s) URL", e)
		}
	}

	var opts []func(*config.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(c.Credentials))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("blob: S3 config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	c.Region = awsCfg.Region
	clientFor := func(endpoint string) *s3.Client {
		return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
			o.UsePathStyle = c.PathStyle
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		})
	}
	client := clientFor(c.Endpoint)
	presignClient := client
	if c.PublicEndpoint != "" {
		presignClient = clientFor(c.PublicEndpoint)
	}
	return &S3{
		cfg:           c,
		prefix:        prefix,
		client:        client,
		presign:       s3.NewPresignClient(presignClient),
		partSize:      c.PartSize,
		parts:         make(chan []byte, c.Concurrency),
		now:           time.Now,
		maxCopyObject: maxCopyObject,
		copyPartSize:  copyPartSize,
	}, nil
}

// Client exposes the underlying SDK client (for tests and tooling).
func (s *S3) Client() *s3.Client { return s.client }

func (s *S3) where() string {
	ep := s.cfg.Endpoint
	if ep == "" {
		ep = "AWS S3 (" + s.cfg.Region + ")"
	}
	return fmt.Sprintf("bucket %q at %s", s.cfg.Bucket, ep)
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cleanupCtx outlives a cancelled ctx so that aborts and deletes still run.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// isNotFound reports a 404 about the object, not about the bucket.
func isNotFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
		return false
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == 404
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, contentType string, maxBytes int64) (Object, error) {
	if err := ValidateKey(key); err != nil {
		return Object{}, err
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	full := s.prefix + key
	hr := newHashingReader(ctx, r, maxBytes)
	// Read one part ahead: a body that fits goes up in a single PutObject
	// that already carries its digest; a larger one streams.
	first, err := readChunks(hr, s.partSize+1)
	if err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if first.size <= s.partSize {
		obj := Object{Key: key, Size: first.size, SHA256: hr.sum(), ContentType: contentType}
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        &s.cfg.Bucket,
			Key:           &full,
			Body:          first.reader(),
			ContentLength: aws.Int64(obj.Size),
			ContentType:   &contentType,
			Metadata:      map[string]string{MetaSHA256: obj.SHA256},
		})
		if err != nil {
			return Object{}, fmt.Errorf("blob: put %s into %s: %w", key, s.where(), err)
		}
		return obj, nil
	}

	staging := s.prefix + stagingDir + randomHex()
	err = s.upload(ctx, staging, contentType, first, hr)
	if hr.err != nil { // the body failed (or was too large): report that, not its echo
		return Object{}, fmt.Errorf("blob: put %s: %w", key, hr.err)
	}
	if err != nil {
		return Object{}, fmt.Errorf("blob: put %s into %s: %w", key, s.where(), err)
	}
	defer func() {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		s.client.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &staging})
	}()
	if !hr.done {
		return Object{}, fmt.Errorf("blob: put %s: upload finished before the body ended", key)
	}
	obj := Object{Key: key, Size: hr.n, SHA256: hr.sum(), ContentType: contentType}
	if err := s.copyInto(ctx, staging, full, obj); err != nil {
		return Object{}, fmt.Errorf("blob: put %s into %s: %w", key, s.where(), err)
	}
	return obj, nil
}

// upload streams a body larger than one part to key as a multipart
// upload: first (already read) is part 1, then parts of partSize read
// from r. A part is held from the moment it is read into until it is
// sent, and at most Concurrency are held at once; part buffers come from
// s.parts and go back to it, so a Put holds at most Concurrency parts and
// the process reuses them across Puts. On failure the upload is aborted.
func (s *S3) upload(ctx context.Context, key, contentType string, first *chunks, r io.Reader) error {
	mpu, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &s.cfg.Bucket, Key: &key, ContentType: &contentType,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		parts []types.CompletedPart
		wg    sync.WaitGroup
	)
	slots := make(chan struct{}, s.cfg.Concurrency)
	// send uploads a part in a slot already taken.
	send := func(n int32, body io.ReadSeeker, size int64, done func()) {
		wg.Go(func() {
			defer func() { <-slots; done() }()
			out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: &s.cfg.Bucket, Key: &key, UploadId: mpu.UploadId,
				PartNumber: aws.Int32(n), Body: body, ContentLength: aws.Int64(size),
			})
			if err != nil {
				cancel(err)
				return
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
			mu.Unlock()
		})
	}
	slots <- struct{}{}
	send(1, first.reader(), first.size, func() {})
	for n := int32(2); ctx.Err() == nil; n++ {
		// A part is read only into a free slot: at most Concurrency
		// parts are held, whether sending or filling.
		slots <- struct{}{}
		buf := s.partBuf()
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			send(n, bytes.NewReader(buf[:k]), int64(k), func() { s.putPartBuf(buf) })
		} else {
			s.putPartBuf(buf)
			<-slots
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			cancel(rerr)
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		cctx, ccancel := cleanupCtx(ctx)
		defer ccancel()
		s.client.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &key, UploadId: mpu.UploadId})
		return err
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return cmp.Compare(*a.PartNumber, *b.PartNumber) })
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.cfg.Bucket, Key: &key, UploadId: mpu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	return err
}

// partBuf takes a part buffer from the pool, or makes one.
func (s *S3) partBuf() []byte {
	select {
	case b := <-s.parts:
		return b
	default:
		return make([]byte, s.partSize)
	}
}

// putPartBuf returns a part buffer to the pool (dropped when it is full).
func (s *S3) putPartBuf(b []byte) {
	select {
	case s.parts <- b:
	default:
	}
}

// copyInto copies src to dst server side, replacing the metadata.
func (s *S3) copyInto(ctx context.Context, src, dst string, obj Object) error {
	source := s.cfg.Bucket + "/" + src // keys need no escaping: see ValidateKey
	meta := map[string]string{MetaSHA256: obj.SHA256}
	if obj.Size <= s.maxCopyObject {
		_, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{
			Bucket:            &s.cfg.Bucket,
			Key:               &dst,
			CopySource:        &source,
			ContentType:       &obj.ContentType,
			Metadata:          meta,
			MetadataDirective: types.MetadataDirectiveReplace,
		})
		return err
	}
	mpu, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:      &s.cfg.Bucket,
		Key:         &dst,
		ContentType: &obj.ContentType,
		Metadata:    meta,
	})
	if err != nil {
		return err
	}
	abort := func(err error) error {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		s.client.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &dst, UploadId: mpu.UploadId})
		return err
	}
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < obj.Size; off, n = off+s.copyPartSize, n+1 {
		end := min(off+s.copyPartSize, obj.Size) - 1
		out, err := s.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket:          &s.cfg.Bucket,
			Key:             &dst,
			UploadId:        mpu.UploadId,
			PartNumber:      aws.Int32(n),
			CopySource:      &source,
			CopySourceRange: aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end, 10)),
		})
		if err != nil {
			return abort(err)
		}
		if out.CopyPartResult == nil {
			return abort(errors.New("UploadPartCopy returned no result"))
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.CopyPartResult.ETag})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &s.cfg.Bucket,
		Key:             &dst,
		UploadId:        mpu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return abort(err)
	}
	return nil
}

func objectFrom(key string, size *int64, contentType *string, meta map[string]string) Object {
	o := Object{Key: key, Size: -1, ContentType: aws.ToString(contentType)}
	if size != nil {
		o.Size = *size
	}
	for k, v := range meta { // the SDK lowercases names; be lenient anyway
		if strings.EqualFold(k, MetaSHA256) {
			o.SHA256 = strings.ToLower(v)
		}
	}
	return o
}

// Open implements Store. The reader checks size and x-amz-meta-sha256 at
// EOF and fails with ErrChecksum on a mismatch. An object without the
// metadata (not written by Put) is only checked for size.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, Object, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Object{}, err
	}
	full := s.prefix + key
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &full})
	if err != nil {
		if isNotFound(err) {
			return nil, Object{}, ErrNotFound
		}
		return nil, Object{}, fmt.Errorf("blob: open %s in %s: %w", key, s.where(), err)
	}
	obj := objectFrom(key, out.ContentLength, out.ContentType, out.Metadata)
	return newVerifyingReader(out.Body, obj), obj, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Object, error) {
	if err := ValidateKey(key); err != nil {
		return Object{}, err
	}
	full := s.prefix + key
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &full})
	if err != nil {
		if isNotFound(err) {
			// A HEAD 404 has no body, so it does not say whether the object
			// or the whole bucket is missing; the latter must not pass for
			// "blob not found".
			if err := s.bucketExists(ctx); err != nil {
				return Object{}, fmt.Errorf("blob: stat %s: %w", key, err)
			}
			return Object{}, ErrNotFound
		}
		return Object{}, fmt.Errorf("blob: stat %s in %s: %w", key, s.where(), err)
	}
	return objectFrom(key, out.ContentLength, out.ContentType, out.Metadata), nil
}

func (s *S3) bucketExists(ctx context.Context) error {
	if time.Since(time.Unix(0, s.bucketSeen.Load())) < bucketRecheck {
		return nil
	}
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Bucket}); err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == 404 {
			return fmt.Errorf("%s does not exist: %w", s.where(), err)
		}
		return fmt.Errorf("%s: %w", s.where(), err)
	}
	s.bucketSeen.Store(time.Now().UnixNano())
	return nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	full := s.prefix + key
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &full})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("blob: delete %s in %s: %w", key, s.where(), err)
	}
	return nil
}

// SignedURL implements Store with a presigned GET (at most MaxPresignTTL,
// whole seconds). expiresAt is read back from the signed URL.
func (s *S3) SignedURL(ctx context.Context, key string, ttl time.Duration) (string, time.Time, error) {
	if err := ValidateKey(key); err != nil {
		return "", time.Time{}, err
	}
	if ttl < time.Second || ttl > MaxPresignTTL {
		return "", time.Time{}, fmt.Errorf("blob: link ttl %v must be between 1s and %v", ttl, MaxPresignTTL)
	}
	full := s.prefix + key
	now := s.now()
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &full},
		s3.WithPresignExpires(ttl), func(o *s3.PresignOptions) { o.Presigner = clockedPresigner{o.Presigner, s.now} })
	if err != nil {
		return "", time.Time{}, fmt.Errorf("blob: sign %s in %s: %w", key, s.where(), err)
	}
	expires := now.Add(ttl.Truncate(time.Second)).Truncate(time.Second)
	if u, err := url.Parse(req.URL); err == nil {
		q := u.Query()
		signed, err1 := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
		secs, err2 := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
		if err1 == nil && err2 == nil {
			expires = signed.Add(time.Duration(secs) * time.Second)
		}
	}
	return req.URL, expires, nil
}

// clockedPresigner signs by the store's clock instead of the SDK's, so
// that tests can mint a link the server already sees as expired.
type clockedPresigner struct {
	s3.HTTPPresignerV4
	now func() time.Time
}

func (p clockedPresigner) PresignHTTP(ctx context.Context, cred aws.Credentials, r *http.Request,
	payloadHash, service, region string, _ time.Time, optFns ...func(*v4.SignerOptions),
) (string, http.Header, error) {
	return p.HTTPPresignerV4.PresignHTTP(ctx, cred, r, payloadHash, service, region, p.now(), optFns...)
}

// CheckBucket verifies that the bucket exists and that these credentials
// can write and delete in it, by putting and deleting a small probe object
// under Prefix + ".probe/". Errors name the bucket and endpoint.
func (s *S3) CheckBucket(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Bucket}); err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			switch re.HTTPStatusCode() {
			case 404:
				return fmt.Errorf("blob: %s does not exist: %w", s.where(), err)
			case 401, 403:
				return fmt.Errorf("blob: %s refused these credentials: %w", s.where(), err)
			}
		}
		return fmt.Errorf("blob: %s is not reachable: %w", s.where(), err)
	}
	probe := s.prefix + probeDir + randomHex()
	body := []byte("darkroom write probe\n")
	if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           &probe,
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("text/plain"),
	}); err != nil {
		return fmt.Errorf("blob: %s is not writable: %w", s.where(), err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &probe}); err != nil {
		return fmt.Errorf("blob: %s: cannot delete the probe object %q: %w", s.where(), probe, err)
	}
	return nil
}

// CreateBucket creates the bucket; one that these credentials already own
// is not an error.
func (s *S3) CreateBucket(ctx context.Context) error {
	in := &s3.CreateBucketInput{Bucket: &s.cfg.Bucket}
	if s.cfg.Region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(s.cfg.Region),
		}
	}
	_, err := s.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("blob: create %s: %w", s.where(), err)
	}
	return nil
}

// Sweep deletes staging objects and aborts multipart uploads under Prefix
// that are older than olderThan: what a crash in the middle of Put leaves.
// Keep olderThan well above the longest upload (an hour is a safe choice);
// a younger upload may still be running in another process. It returns how
// many objects and uploads it removed.
func (s *S3) Sweep(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := s.now().Add(-olderThan)
	removed := 0
	staging := s.prefix + stagingDir
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: &staging})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return removed, fmt.Errorf("blob: sweep %s: %w", s.where(), err)
		}
		for _, o := range page.Contents {
			if o.LastModified != nil && o.LastModified.Before(cutoff) {
				if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: o.Key}); err != nil {
					return removed, fmt.Errorf("blob: sweep %s: %w", s.where(), err)
				}
				removed++
			}
		}
	}
	in := &s3.ListMultipartUploadsInput{Bucket: &s.cfg.Bucket}
	if s.prefix != "" {
		in.Prefix = &s.prefix
	}
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return removed, fmt.Errorf("blob: sweep %s: %w", s.where(), err)
		}
		for _, u := range page.Uploads {
			if u.Initiated != nil && u.Initiated.Before(cutoff) {
				if _, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: u.Key, UploadId: u.UploadId}); err != nil && !isNotFound(err) {
					return removed, fmt.Errorf("blob: sweep %s: %w", s.where(), err)
				}
				removed++
			}
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
	return removed, nil
}
