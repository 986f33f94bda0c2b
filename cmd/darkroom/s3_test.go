package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/generation"
)

// s3Config points darkroom at the test S3 server (versitygw, started by
// scripts/test.sh), or skips.
func s3Config(t *testing.T, bucket string) blob.S3Config {
	ep := os.Getenv("DARKROOM_TEST_S3_ENDPOINT")
	if ep == "" {
		t.Skip("DARKROOM_TEST_S3_ENDPOINT not set: run scripts/s3-test-server.sh start (make test does)")
	}
	access, secret := os.Getenv("DARKROOM_TEST_S3_ACCESS_KEY"), os.Getenv("DARKROOM_TEST_S3_SECRET_KEY")
	if access == "" {
		access, secret = "testkey", "testsecret"
	}
	return blob.S3Config{Bucket: bucket, Endpoint: ep, Region: "us-east-1", PathStyle: true, Prefix: "outputs",
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, "")}
}

func TestS3MissingBucketRefusesToStart(t *testing.T) {
	cfg, _ := parseConfig("test", nil)
	cfg.DataDir = t.TempDir()
	cfg.S3 = s3Config(t, "missing-"+generation.NewID()[:12])
	_, err := build(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "--create-bucket") {
		t.Fatalf("missing bucket: %v", err)
	}
}

// TestS3EndToEnd: generate → completed → download_output link returns the
// same bytes and sha256 as the object in the bucket.
func TestS3EndToEnd(t *testing.T) {
	bucket := "e2e-" + generation.NewID()[:12]
	s3cfg := s3Config(t, bucket)
	s := startServer(t, 0, func(c *config) { c.S3 = s3cfg; c.CreateBucket = true })
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "stored in s3", "wait": true, "waitSeconds": 30}, &g)
	if g.Status != "completed" {
		t.Fatalf("generate: %+v", g)
	}
	var d struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
		Bytes  int64  `json:"bytes"`
	}
	call(t, cs, "download_output", map[string]any{"generationId": g.GenerationID}, &d)
	if !strings.Contains(d.URL, "X-Amz-Signature=") {
		t.Fatalf("not a presigned S3 link: %s", d.URL)
	}
	code, body := httpGet(t, d.URL)
	if code != 200 {
		t.Fatalf("GET presigned link: %d %s", code, body)
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != d.SHA256 || int64(len(body)) != d.Bytes {
		t.Fatal("link bytes do not match the reported sha256")
	}
	// The object in the bucket is the same.
	rc, obj, err := s.app.blobs.Open(context.Background(), blob.Key("local", g.GenerationID, 0, "png"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	inBucket, _ := io.ReadAll(rc)
	if string(inBucket) != string(body) || obj.SHA256 != d.SHA256 {
		t.Fatal("bucket object differs from the link's bytes")
	}
}
