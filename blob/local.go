package blob

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FilesPath is where the server mounts (*Local).Handler, without stripping
// the prefix: mux.Handle(blob.FilesPath, local.Handler()).
const FilesPath = "/files/"

// MinSecretLen is the shortest HMAC secret NewLocal accepts.
const MinSecretLen = 16

// DefaultContentType is recorded when Put is given none.
const DefaultContentType = "application/octet-stream"

// On disk every blob is one file, <dir>/<key>, holding the body followed
// by a trailer: the metadata as JSON, its length as 8 bytes big-endian,
// and trailerMagic. Body and metadata therefore land together in one
// atomic rename; a sidecar file would need a second rename, and a crash or
// an overwrite between the two could pair new bytes with old metadata.
// The files are never served raw: Handler serves only the body section.
const (
	trailerMagic   = "DRBLOB01"
	trailerFixed   = 8 + len(trailerMagic)
	maxMetaLen     = 64 << 10
	tempFilePrefix = ".tmp-"
)

type localMeta struct {
	Version     int    `json:"v"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"contentType"`
}

// Local stores blobs in a folder and hands them out as HMAC-signed links
// served by Handler.
type Local struct {
	dir     string
	secret  []byte
	baseURL string
	now     func() time.Time
}

var _ Store = (*Local)(nil)

// NewLocal opens (creating if needed) a blob folder. secret keys the link
// signatures and must be at least MinSecretLen bytes. baseURL is the
// public origin (and path prefix, if any) that links start with, e.g.
// "https://darkroom.example.com"; links are baseURL + "/files/" + key.
func NewLocal(dir string, secret []byte, baseURL string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("blob: local dir is empty")
	}
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("blob: link secret must be at least %d bytes, got %d", MinSecretLen, len(secret))
	}
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("blob: base URL %q must be an absolute http(s) URL without query", baseURL)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob: local dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("blob: local dir: %w", err)
	}
	return &Local{
		dir:     abs,
		secret:  append([]byte(nil), secret...),
		baseURL: strings.TrimRight(baseURL, "/"),
		now:     time.Now,
	}, nil
}

// Dir is the absolute folder the blobs live in.
func (l *Local) Dir() string { return l.dir }

func (l *Local) path(key string) string { return filepath.Join(l.dir, filepath.FromSlash(key)) }

// Put implements Store. The body streams to a temporary file beside the
// target, is fsynced and renamed into place; on any error the temporary
// file is removed and key keeps whatever it had before.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, contentType string, maxBytes int64) (Object, error) {
	if err := ValidateKey(key); err != nil {
		return Object{}, err
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	target := l.path(key)
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	f, err := os.CreateTemp(parent, tempFilePrefix+"*")
	if err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(f.Name())
		}
	}()

	hr := newHashingReader(ctx, r, maxBytes)
	n, err := io.Copy(f, hr)
	if err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	obj := Object{Key: key, Size: n, SHA256: hr.sum(), ContentType: contentType}
	meta, err := json.Marshal(localMeta{Version: 1, Size: n, SHA256: obj.SHA256, ContentType: contentType})
	if err != nil {
		return Object{}, err
	}
	trailer := make([]byte, 0, len(meta)+trailerFixed)
	trailer = append(trailer, meta...)
	trailer = binary.BigEndian.AppendUint64(trailer, uint64(len(meta)))
	trailer = append(trailer, trailerMagic...)
	if _, err := f.Write(trailer); err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return Object{}, fmt.Errorf("blob: put %s: %w", key, err)
	}
	committed = true
	syncDir(parent)
	return obj, nil
}

// syncDir makes a rename in dir durable. Errors are ignored: some
// filesystems cannot fsync a directory, and the rename already happened.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// openBlob opens key and reads its trailer. The caller closes the file.
func (l *Local) openBlob(key string) (*os.File, Object, time.Time, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Object{}, time.Time{}, err
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, Object{}, time.Time{}, ErrNotFound
		}
		return nil, Object{}, time.Time{}, fmt.Errorf("blob: open %s: %w", key, err)
	}
	obj, mtime, err := readTrailer(f, key)
	if err != nil {
		f.Close()
		return nil, Object{}, time.Time{}, err
	}
	return f, obj, mtime, nil
}

func readTrailer(f *os.File, key string) (Object, time.Time, error) {
	fi, err := f.Stat()
	if err != nil {
		return Object{}, time.Time{}, fmt.Errorf("blob: open %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Object{}, time.Time{}, ErrNotFound
	}
	corrupt := func(why string) error { return fmt.Errorf("blob: %s: corrupt file %s: %s", key, f.Name(), why) }
	size := fi.Size()
	if size < int64(trailerFixed) {
		return Object{}, time.Time{}, corrupt("too short")
	}
	var fixed [trailerFixed]byte
	if _, err := f.ReadAt(fixed[:], size-int64(trailerFixed)); err != nil {
		return Object{}, time.Time{}, fmt.Errorf("blob: open %s: %w", key, err)
	}
	if string(fixed[8:]) != trailerMagic {
		return Object{}, time.Time{}, corrupt("no trailer")
	}
	metaLen := binary.BigEndian.Uint64(fixed[:8])
	if metaLen > maxMetaLen || int64(metaLen) > size-int64(trailerFixed) {
		return Object{}, time.Time{}, corrupt("bad trailer length")
	}
	buf := make([]byte, metaLen)
	bodySize := size - int64(trailerFixed) - int64(metaLen)
	if _, err := f.ReadAt(buf, bodySize); err != nil {
		return Object{}, time.Time{}, fmt.Errorf("blob: open %s: %w", key, err)
	}
	var m localMeta
	if err := json.Unmarshal(buf, &m); err != nil || m.Version != 1 {
		return Object{}, time.Time{}, corrupt("bad metadata")
	}
	if m.Size != bodySize {
		return Object{}, time.Time{}, corrupt("size does not match metadata")
	}
	return Object{Key: key, Size: m.Size, SHA256: m.SHA256, ContentType: m.ContentType}, fi.ModTime(), nil
}

type sectionFile struct {
	*io.SectionReader
	f *os.File
}

func (s sectionFile) Close() error { return s.f.Close() }

// Open implements Store. The reader fails with ErrChecksum at EOF if the
// bytes on disk no longer match the SHA-256 recorded at Put.
func (l *Local) Open(ctx context.Context, key string) (io.ReadCloser, Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, Object{}, err
	}
	f, obj, _, err := l.openBlob(key)
	if err != nil {
		return nil, Object{}, err
	}
	return newVerifyingReader(sectionFile{io.NewSectionReader(f, 0, obj.Size), f}, obj), obj, nil
}

// Stat implements Store.
func (l *Local) Stat(ctx context.Context, key string) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	f, obj, _, err := l.openBlob(key)
	if err != nil {
		return Object{}, err
	}
	f.Close()
	return obj, nil
}

// Delete implements Store. Empty folders are left in place.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.Remove(l.path(key))
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	return fmt.Errorf("blob: delete %s: %w", key, err)
}

// Sweep removes temporary files that a crashed Put left behind and that
// are older than olderThan. It returns how many it removed.
func (l *Local) Sweep(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := l.now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempFilePrefix) {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(cutoff) {
			if os.Remove(p) == nil {
				removed++
			}
		}
		return nil
	})
	return removed, err
}

// sign is hex(HMAC-SHA256(secret, key + "\n" + exp)).
func (l *Local) sign(key, exp string) []byte {
	m := hmac.New(sha256.New, l.secret)
	m.Write([]byte(key))
	m.Write([]byte{'\n'})
	m.Write([]byte(exp))
	return m.Sum(nil)
}

// SignedURL implements Store: {baseURL}/files/{key}?exp={unix}&sig={hex}.
// The link is valid until exp, rounded up to the next whole second. It does
// not check that key exists.
func (l *Local) SignedURL(ctx context.Context, key string, ttl time.Duration) (string, time.Time, error) {
	if err := ValidateKey(key); err != nil {
		return "", time.Time{}, err
	}
	if ttl <= 0 {
		return "", time.Time{}, fmt.Errorf("blob: link ttl must be positive, got %v", ttl)
	}
	expT := l.now().Add(ttl)
	exp := expT.Unix()
	if expT.After(time.Unix(exp, 0)) {
		exp++
	}
	es := strconv.FormatInt(exp, 10)
	u := l.baseURL + FilesPath + key + "?exp=" + es + "&sig=" + hex.EncodeToString(l.sign(key, es))
	return u, time.Unix(exp, 0), nil
}

// Handler serves links minted by SignedURL. Mount it at FilesPath without
// stripping the prefix. A missing, malformed, tampered or expired signature
// answers 403; 404 only when the signature is good but the blob is gone.
// Range requests and conditional requests are served by http.ServeContent.
func (l *Local) Handler() http.Handler {
	return http.HandlerFunc(l.serveHTTP)
}

func (l *Local) serveHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key, ok := strings.CutPrefix(r.URL.Path, FilesPath)
	if !ok {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	es, sigHex := q.Get("exp"), q.Get("sig")
	sig, err := hex.DecodeString(sigHex)
	if es == "" || err != nil || !hmac.Equal(sig, l.sign(key, es)) {
		http.Error(w, "forbidden: bad or missing link signature", http.StatusForbidden)
		return
	}
	exp, err := strconv.ParseInt(es, 10, 64)
	now := l.now()
	if err != nil || now.Unix() >= exp {
		http.Error(w, "forbidden: link expired", http.StatusForbidden)
		return
	}
	if ValidateKey(key) != nil {
		http.Error(w, "forbidden: bad key", http.StatusForbidden)
		return
	}
	f, obj, mtime, err := l.openBlob(key)
	if errors.Is(err, ErrNotFound) {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	h.Set("Content-Type", obj.ContentType)
	h.Set("Cache-Control", "private, max-age="+strconv.FormatInt(exp-now.Unix(), 10))
	h.Set("ETag", `"`+obj.SHA256+`"`)
	http.ServeContent(w, r, "", mtime, io.NewSectionReader(f, 0, obj.Size))
}
