package generation

import (
	"context"
	"errors"
	"io"

	"github.com/darkroom-mcp/darkroom/storage/blob"
)

// ErrOutputGone is returned when an output's file is no longer in the
// blob store (retention deleted it, before or after the record says so).
var ErrOutputGone = errors.New("generation: output file deleted")

// OpenOutput streams a stored output back from the blob store. The caller
// closes the reader.
func (s *Service) OpenOutput(ctx context.Context, b StoredBlob) (io.ReadCloser, error) {
	rc, _, err := s.cfg.Blobs.Open(ctx, b.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, ErrOutputGone
	}
	return rc, err
}
