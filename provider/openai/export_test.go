package openai

// SetMaxOutputBytes lowers the bound on one spooled image, so a test of
// an endless image need not stream 128 MiB.
func SetMaxOutputBytes(p *Provider, n int64) { p.journal.MaxBytes = n }
