package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/targets"
)

// targetSource is one discovery source: each refresh reads its documents
// and returns its complete current set of targets.
type targetSource struct {
	name     string // targets.file_sd[0], targets.http_sd[1]: its config key
	interval time.Duration
	limits   targets.Limits
	// read returns the source's documents, each at most maxBytes.
	read func(ctx context.Context) ([][]byte, error)
}

// Per-group bounds of every source: Prometheus' own limits are looser,
// but an agent server's labels are a handful of short strings.
const (
	maxLabelsPerGroup = 64
	maxLabelBytes     = 4096
	// maxFilesPerSource bounds the files a file_sd source's globs match.
	maxFilesPerSource = 1000
)

// sourceUpdate is what one refresh of source index found: its set, or
// the error that made the refresh fail (the set is then nil and ignored).
type sourceUpdate struct {
	index   int
	targets []targets.Target
	// skipped are the listed targets left out, each with why.
	skipped []error
	err     error
}

// refresh reads and parses the source once.
func (s *targetSource) refresh(ctx context.Context, index int) sourceUpdate {
	docs, err := s.read(ctx)
	if err != nil {
		return sourceUpdate{index: index, err: err}
	}
	var groups []targets.Group
	lim := s.limits
	for _, doc := range docs {
		g, err := targets.Parse(doc, lim)
		if err != nil {
			return sourceUpdate{index: index, err: err}
		}
		for _, group := range g {
			lim.MaxTargets -= len(group.Targets)
		}
		groups = append(groups, g...)
	}
	set, skipped := targets.Resolve(groups)
	return sourceUpdate{index: index, targets: set, skipped: skipped}
}

// run refreshes the source now and then every interval, until ctx ends.
func (s *targetSource) run(ctx context.Context, index int, out chan<- sourceUpdate) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		u := s.refresh(ctx, index)
		select {
		case out <- u:
		case <-ctx.Done():
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

func sourceLimits(l SourceLimits) targets.Limits {
	return targets.Limits{MaxTargets: l.MaxTargets, MaxLabels: maxLabelsPerGroup, MaxValueBytes: maxLabelBytes}
}

// newFileSource reads every file its globs match: a file that vanished is
// no targets (Prometheus' reading), one that cannot be read or parsed
// fails the refresh (a half-written file keeps the last good set).
func newFileSource(index int, cfg FileSDConfig) *targetSource {
	l := cfg.withDefaults()
	return &targetSource{
		name:     fmt.Sprintf("targets.file_sd[%d]", index),
		interval: l.RefreshInterval,
		limits:   sourceLimits(l),
		read: func(context.Context) ([][]byte, error) {
			var paths []string
			for _, pattern := range cfg.Files {
				matched, err := filepath.Glob(pattern)
				if err != nil {
					return nil, err
				}
				paths = append(paths, matched...)
			}
			slices.Sort(paths)
			paths = slices.Compact(paths)
			if len(paths) > maxFilesPerSource {
				return nil, fmt.Errorf("files match %d files, more than %d", len(paths), maxFilesPerSource)
			}
			docs := make([][]byte, 0, len(paths))
			for _, p := range paths {
				doc, err := readFileBounded(p, l.MaxBytes)
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, err
				}
				docs = append(docs, doc)
			}
			return docs, nil
		},
	}
}

func readFileBounded(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, maxBytes, path)
}

// readBounded reads r whole, refusing more than maxBytes.
func readBounded(r io.Reader, maxBytes int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", what, err)
	case int64(len(data)) > maxBytes:
		return nil, fmt.Errorf("%s: larger than max_bytes (%d)", what, maxBytes)
	}
	return data, nil
}

// newHTTPSource GETs the URL with its client (auth, TLS, headers). It
// refuses redirects: Go carries custom headers such as an API key to
// whatever host a redirect names.
func newHTTPSource(ctx context.Context, host component.Host, set component.TelemetrySettings, index int, cfg HTTPSDConfig) (*targetSource, error) {
	l := cfg.withDefaults()
	name := fmt.Sprintf("targets.http_sd[%d]", index)
	client, err := cfg.ToClient(ctx, host.GetExtensions(), set)
	if err != nil {
		return nil, fmt.Errorf("%s: http client: %w", name, err)
	}
	if client.Timeout == 0 {
		client.Timeout = defaultServerTimeout
	}
	client.CheckRedirect = refuseRedirect
	return &targetSource{
		name:     name,
		interval: l.RefreshInterval,
		limits:   sourceLimits(l),
		read: func(ctx context.Context) ([][]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Endpoint, http.NoBody)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Accept", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				var ue *url.Error
				if errors.As(err, &ue) {
					err = ue.Err // without the URL: its query may carry a token
				}
				return nil, fmt.Errorf("GET: %w", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("GET: unexpected status %s", resp.Status)
			}
			doc, err := readBounded(resp.Body, l.MaxBytes, "GET")
			if err != nil {
				return nil, err
			}
			return [][]byte{doc}, nil
		},
	}, nil
}
