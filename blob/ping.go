package blob

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Pinger is a store that can tell whether it is reachable now.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ping checks that the bucket answers (HeadBucket), for readiness.
func (s *S3) Ping(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.cfg.Bucket}); err != nil {
		return fmt.Errorf("blob: %s is not reachable: %w", s.where(), err)
	}
	return nil
}

// Ping checks that the folder exists and takes a file, for readiness.
func (l *Local) Ping(ctx context.Context) error {
	f, err := os.CreateTemp(l.dir, tempFilePrefix+"ping-*") // swept if left
	if err != nil {
		return fmt.Errorf("blob: folder %s is not writable: %w", l.dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}
