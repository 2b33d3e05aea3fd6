package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/targets"
)

// targetSource is one discovery source: each refresh reads its documents
// and returns its complete current set of targets.
type targetSource struct {
	name     string // targets.file_sd[0], targets.http_sd[1]: its config key
	interval time.Duration
	// list reads the source's groups, within its limits.
	list func(ctx context.Context) ([]targets.Group, error)
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

// refresh reads the source once.
func (s *targetSource) refresh(ctx context.Context, index int) sourceUpdate {
	groups, err := s.list(ctx)
	if err != nil {
		return sourceUpdate{index: index, err: err}
	}
	set, skipped := targets.Resolve(groups)
	return sourceUpdate{index: index, targets: set, skipped: skipped}
}

// parseDocs parses service-discovery documents, the limits holding for
// all of them together.
func parseDocs(docs [][]byte, lim targets.Limits) ([]targets.Group, error) {
	var groups []targets.Group
	for _, doc := range docs {
		g, err := targets.Parse(doc, lim)
		if err != nil {
			return nil, err
		}
		for _, group := range g {
			lim.MaxTargets -= len(group.Targets)
		}
		groups = append(groups, g...)
	}
	return groups, nil
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
		list: func(context.Context) ([]targets.Group, error) {
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
			return parseDocs(docs, sourceLimits(l))
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

// sourceClient GETs a source's documents with its client (auth, TLS,
// headers), bounded by max_bytes. It refuses redirects: Go carries custom
// headers such as an API key to whatever host a redirect names.
type sourceClient struct {
	client   *http.Client
	header   http.Header // what the request carries beside the client's headers
	maxBytes int64
}

func newSourceClient(ctx context.Context, host component.Host, set component.TelemetrySettings, name string, cfg *confighttp.ClientConfig, maxBytes int64) (*sourceClient, error) {
	client, err := cfg.ToClient(ctx, host.GetExtensions(), set)
	if err != nil {
		return nil, fmt.Errorf("%s: http client: %w", name, err)
	}
	if client.Timeout == 0 {
		client.Timeout = defaultServerTimeout
	}
	client.CheckRedirect = refuseRedirect
	return &sourceClient{client: client, header: http.Header{"Accept": {"application/json"}}, maxBytes: maxBytes}, nil
}

func (c *sourceClient) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, c.header)
	resp, err := c.client.Do(req)
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
	return readBounded(resp.Body, c.maxBytes, "GET")
}

// newHTTPSource reads an http_sd endpoint.
func newHTTPSource(ctx context.Context, host component.Host, set component.TelemetrySettings, index int, cfg HTTPSDConfig) (*targetSource, error) {
	l := cfg.withDefaults()
	name := fmt.Sprintf("targets.http_sd[%d]", index)
	c, err := newSourceClient(ctx, host, set, name, &cfg.ClientConfig, l.MaxBytes)
	if err != nil {
		return nil, err
	}
	return &targetSource{
		name:     name,
		interval: l.RefreshInterval,
		list: func(ctx context.Context) ([]targets.Group, error) {
			doc, err := c.get(ctx, cfg.Endpoint)
			if err != nil {
				return nil, err
			}
			return targets.ParseJSON(doc, sourceLimits(l))
		},
	}, nil
}

// newRuntimeAPISource reads a runtime API's GET {endpoint}/list, with
// X-API-Key.
func newRuntimeAPISource(ctx context.Context, host component.Host, set component.TelemetrySettings, index int, cfg RuntimeAPIConfig) (*targetSource, error) {
	l := cfg.withDefaults()
	name := fmt.Sprintf("targets.runtime_api[%d]", index)
	c, err := newSourceClient(ctx, host, set, name, &cfg.ClientConfig, l.MaxBytes)
	if err != nil {
		return nil, err
	}
	if cfg.APIKey != "" {
		c.header.Set("X-API-Key", string(cfg.APIKey))
	}
	listURL := strings.TrimRight(cfg.Endpoint, "/") + "/list"
	return &targetSource{
		name:     name,
		interval: l.RefreshInterval,
		list: func(ctx context.Context) ([]targets.Group, error) {
			doc, err := c.get(ctx, listURL)
			if err != nil {
				return nil, err
			}
			return targets.RuntimeList(doc, sourceLimits(l))
		},
	}, nil
}

// maxSandboxPages bounds the pages of one app server refresh: a server
// whose next_page_id never ends fails the refresh.
const maxSandboxPages = 1000

// newAppServerSource pages an app server's GET
// /api/v1/sandboxes/search, with X-Session-API-Key when it has one.
func newAppServerSource(ctx context.Context, host component.Host, set component.TelemetrySettings, index int, cfg AppServerConfig) (*targetSource, error) {
	l := cfg.withDefaults()
	name := fmt.Sprintf("targets.app_server[%d]", index)
	c, err := newSourceClient(ctx, host, set, name, &cfg.ClientConfig, l.MaxBytes)
	if err != nil {
		return nil, err
	}
	if cfg.SessionAPIKey != "" {
		c.header.Set("X-Session-API-Key", string(cfg.SessionAPIKey))
	}
	search := strings.TrimRight(cfg.Endpoint, "/") + "/api/v1/sandboxes/search"
	return &targetSource{
		name:     name,
		interval: l.RefreshInterval,
		list: func(ctx context.Context) ([]targets.Group, error) {
			var groups []targets.Group
			lim := sourceLimits(l)
			q := url.Values{"limit": {"100"}}
			for range maxSandboxPages {
				doc, err := c.get(ctx, search+"?"+q.Encode())
				if err != nil {
					return nil, err
				}
				page, next, err := targets.SandboxPage(doc, lim)
				if err != nil {
					return nil, err
				}
				groups = append(groups, page...)
				lim.MaxTargets -= len(page)
				if next == "" {
					return groups, nil
				}
				q.Set("page_id", next)
			}
			return nil, fmt.Errorf("more than %d pages", maxSandboxPages)
		},
	}, nil
}
