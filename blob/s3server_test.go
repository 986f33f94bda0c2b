package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Environment for the S3 tests (scripts/s3-test-server.sh start writes it).
const (
	envS3Endpoint  = "DARKROOM_TEST_S3_ENDPOINT"
	envS3AccessKey = "DARKROOM_TEST_S3_ACCESS_KEY"
	envS3SecretKey = "DARKROOM_TEST_S3_SECRET_KEY"
	envVersityGW   = "DARKROOM_TEST_VERSITYGW"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func testCreds() (access, secret string) {
	return envOr(envS3AccessKey, "testkey"), envOr(envS3SecretKey, "testsecret")
}

// s3Endpoint returns the shared test server's endpoint or skips the test.
func s3Endpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv(envS3Endpoint)
	if ep == "" {
		t.Skipf("S3 tests need a server: set %s (source the file printed by scripts/s3-test-server.sh start)", envS3Endpoint)
	}
	return ep
}

// newTestS3 returns an S3 store on a fresh bucket at endpoint, emptied and
// removed when the test ends. The part size is the 5 MiB minimum so that
// the contract's "big" bodies take the multipart path.
func newTestS3(t testing.TB, endpoint string, mod func(*S3Config)) *S3 {
	t.Helper()
	access, secret := testCreds()
	cfg := S3Config{
		Bucket:      "darkroom-test-" + randomHex()[:16],
		Endpoint:    endpoint,
		Region:      "us-east-1",
		PathStyle:   true,
		PartSize:    MinS3PartSize,
		Concurrency: 4,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx := context.Background()
	s, err := NewS3(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeBucket(s) })
	return s
}

// removeBucket empties and deletes the bucket, best effort.
func removeBucket(s *S3) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, b := s.client, &s.cfg.Bucket
	if ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b}); err == nil {
		for _, u := range ups.Uploads {
			c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: b, Key: u.Key, UploadId: u.UploadId})
		}
	}
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: b})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			break
		}
		for _, o := range page.Contents {
			c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: o.Key})
		}
	}
	c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b})
}

func (s *S3) setNow(now func() time.Time) { s.now = now }

// debris lists staging objects, probe objects and unfinished multipart
// uploads: what a failed Put must not leave behind.
func (s *S3) debris(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, dir := range []string{stagingDir, probeDir} {
		p := s.prefix + dir
		page, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: &p})
		if err != nil {
			t.Fatalf("list %s: %v", p, err)
		}
		for _, o := range page.Contents {
			out = append(out, "object "+aws.ToString(o.Key))
		}
	}
	ups, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &s.cfg.Bucket})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	for _, u := range ups.Uploads {
		out = append(out, "upload "+aws.ToString(u.Key))
	}
	return out
}

// corrupt rewrites the object with one byte flipped, keeping its metadata.
func (s *S3) corrupt(t *testing.T, key string) {
	t.Helper()
	ctx := context.Background()
	full := s.prefix + key
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &full})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(out.Body)
	out.Body.Close()
	b := buf.Bytes()
	b[0] ^= 0xff
	if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.cfg.Bucket, Key: &full, Body: bytes.NewReader(b),
		ContentType: out.ContentType, Metadata: out.Metadata,
	}); err != nil {
		t.Fatal(err)
	}
}

// versityGW is a versitygw process this test owns, so it can be killed
// and restarted (same port, same data) to simulate an outage.
type versityGW struct {
	bin, dir, addr string
	logPath        string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// startVersityGW starts a private versitygw on a free loopback port with a
// temp data dir, or skips the test when DARKROOM_TEST_VERSITYGW is unset.
func startVersityGW(t *testing.T) *versityGW {
	t.Helper()
	bin := os.Getenv(envVersityGW)
	if bin == "" {
		t.Skipf("outage tests need their own server: set %s to a versitygw binary (scripts/tools.sh versitygw)", envVersityGW)
	}
	tmp := t.TempDir()
	g := &versityGW{bin: bin, dir: tmp + "/data", logPath: tmp + "/versitygw.log"}
	if err := os.Mkdir(g.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.stop)
	var err error
	for range 5 {
		g.addr, err = freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if err = g.start(); err == nil {
			return g
		}
	}
	t.Fatalf("versitygw did not start: %v\n%s", err, g.logText())
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (g *versityGW) endpoint() string { return "http://" + g.addr }

// start runs versitygw on g.addr and waits until it answers HTTP.
func (g *versityGW) start() error {
	access, secret := testCreds()
	cmd := exec.Command(g.bin, "--port", g.addr, "posix", g.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+access, "ROOT_SECRET_ACCESS_KEY="+secret)
	logf, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	g.cmd, g.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(g.exited) }()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return errors.New("versitygw exited during start")
		default:
		}
		if resp, err := client.Get(g.endpoint()); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.stop()
	return fmt.Errorf("versitygw on %s did not answer in time", g.addr)
}

// stop kills the server at once (an outage, not a graceful shutdown).
func (g *versityGW) stop() {
	if g.cmd == nil {
		return
	}
	g.cmd.Process.Kill()
	<-g.exited
	g.cmd = nil
}

// restart starts the server again on the same port with the same data.
func (g *versityGW) restart(t *testing.T) {
	t.Helper()
	var err error
	for range 20 { // the port may linger briefly after the kill
		if err = g.start(); err == nil {
			return
		}
		if !strings.Contains(g.logText(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("versitygw restart: %v\n%s", err, g.logText())
}

func (g *versityGW) logText() string {
	b, _ := os.ReadFile(g.logPath)
	return string(b)
}
