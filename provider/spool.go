package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Spool keeps what a synchronous vendor call produced (its decoded files
// and a small record of its attempts) between the call, made inside
// Submit, and the runner's copy into the blob store. darkroom backs it
// with the blob store itself, so a replica that takes a generation over
// finds what another one spooled; DirSpool is the single-process form.
type Spool interface {
	// Put streams r into key (replacing it); a reader error leaves
	// nothing under key.
	Put(ctx context.Context, key string, r io.Reader, contentType string) error
	// Open streams key back; a missing key is ErrNotFound.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ErrResubmitOnce is Find's answer for a synchronous provider whose one
// earlier call was interrupted with its outcome unknown (the process was
// killed mid-call): the runner may submit once more, and says so, since
// the vendor may run and bill both calls. A second interruption is
// ErrUnsupported (with DuplicateRisk): never a third call.
var ErrResubmitOnce = errors.New("provider: an interrupted call may be made once more")

// DirSpool is a Spool in a local folder.
type DirSpool string

func (d DirSpool) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("spool: bad key %q", key)
	}
	return filepath.Join(string(d), filepath.FromSlash(key)), nil
}

// Put implements Spool: written to a temporary file, then renamed.
func (d DirSpool) Put(ctx context.Context, key string, r io.Reader, contentType string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".spool-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Open implements Spool.
func (d DirSpool) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("spool %s: %w", key, ErrNotFound)
	}
	return f, err
}

// Delete implements Spool.
func (d DirSpool) Delete(ctx context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ResubmittedNote starts the Status message of a job made by the one
// resubmit ErrResubmitOnce allows; the runner keeps it in the
// generation's final message.
const ResubmittedNote = "resubmitted once after an interrupted call"
