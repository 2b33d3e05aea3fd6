package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
)

// TargetsConfig is where the agent servers not listed under servers come
// from: sources that each return the complete current set on every
// refresh (README "Discovered servers").
type TargetsConfig struct {
	// FileSD are Prometheus file_sd files (JSON or YAML; globs), re-read
	// every refresh_interval.
	FileSD []FileSDConfig `mapstructure:"file_sd"`
	// HTTPSD are Prometheus http_sd URLs (the OpenTelemetry Operator's
	// Target Allocator serves one per collector).
	HTTPSD []HTTPSDConfig `mapstructure:"http_sd"`
	// RuntimeAPI are OpenHands runtime APIs (GET {endpoint}/list): every
	// running runtime, for all users.
	RuntimeAPI []RuntimeAPIConfig `mapstructure:"runtime_api"`
	// AppServer are OpenHands app servers (GET /api/v1/sandboxes/search):
	// their running sandboxes.
	AppServer []AppServerConfig `mapstructure:"app_server"`
	// Socket is servers[].socket for every target.
	Socket string `mapstructure:"socket"`
	// Timeout bounds each REST call and socket handshake of a target.
	Timeout time.Duration `mapstructure:"timeout"`
	// TLS is how https targets are verified (a private CA, say).
	TLS configtls.ClientConfig `mapstructure:"tls"`
	// MaxConversations bounds the conversations of one target attached at
	// once (default 4).
	MaxConversations int `mapstructure:"max_conversations"`
	// MaxTargets bounds the targets watched at once; the rest wait. 0 is
	// the descriptor budget (README "Discovered servers").
	MaxTargets int `mapstructure:"max_targets"`
	// AttachRate is the most targets attached per second (default 10), so
	// a source listing thousands does not open thousands of sockets at once.
	AttachRate float64 `mapstructure:"attach_rate"`
	// Grace is how long a target no source lists any more is kept while
	// it still has live sessions (default 2m): past it, a target
	// unreachable for that long has its sessions ended, a reachable one is
	// let go (whoever is given it now observes them).
	Grace time.Duration `mapstructure:"grace"`
	// SessionAPIKeyDir is the only directory a key-file label may name a
	// file in; unset, key-file labels are refused.
	SessionAPIKeyDir string `mapstructure:"session_api_key_dir"`
	// SessionAPIKeyEnvPrefix is the prefix an environment variable named
	// by a key-env label must have; unset, key-env labels are refused.
	SessionAPIKeyEnvPrefix string `mapstructure:"session_api_key_env_prefix"`

	_ struct{}
}

// SourceLimits bound what one refresh of a source may make the receiver
// hold: a hostile or broken source gets its refresh refused, and the last
// good set stands.
type SourceLimits struct {
	// RefreshInterval is the refresh cadence (default 30s).
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// MaxTargets is the most targets one refresh may list (default 10000).
	MaxTargets int `mapstructure:"max_targets"`
	// MaxBytes bounds one response body or file (default 8 MiB).
	MaxBytes int64 `mapstructure:"max_bytes"`
}

// FileSDConfig is one file_sd source.
type FileSDConfig struct {
	// Files are paths or globs; together they are the source's set.
	Files        []string `mapstructure:"files"`
	SourceLimits `mapstructure:",squash"`

	_ struct{}
}

// HTTPSDConfig is one http_sd source: endpoint, auth, TLS, headers and
// timeout of the GET.
type HTTPSDConfig struct {
	confighttp.ClientConfig `mapstructure:",squash"`
	SourceLimits            `mapstructure:",squash"`

	_ struct{}
}

// Unmarshal reads an http_sd entry over the HTTP client's defaults
// (ServerConfig.Unmarshal says why).
func (c *HTTPSDConfig) Unmarshal(conf *confmap.Conf) error {
	c.ClientConfig = confighttp.NewDefaultClientConfig()
	return conf.Unmarshal(c)
}

// RuntimeAPIConfig is one OpenHands runtime API.
type RuntimeAPIConfig struct {
	confighttp.ClientConfig `mapstructure:",squash"`
	// APIKey is sent as X-API-Key.
	APIKey       configopaque.String `mapstructure:"api_key"`
	SourceLimits `mapstructure:",squash"`

	_ struct{}
}

// Unmarshal reads a runtime_api entry over the HTTP client's defaults
// (ServerConfig.Unmarshal says why).
func (c *RuntimeAPIConfig) Unmarshal(conf *confmap.Conf) error {
	c.ClientConfig = confighttp.NewDefaultClientConfig()
	return conf.Unmarshal(c)
}

// AppServerConfig is one OpenHands app server.
type AppServerConfig struct {
	confighttp.ClientConfig `mapstructure:",squash"`
	// SessionAPIKey is sent as X-Session-API-Key, when the app server has
	// one.
	SessionAPIKey configopaque.String `mapstructure:"session_api_key"`
	SourceLimits  `mapstructure:",squash"`

	_ struct{}
}

// Unmarshal reads an app_server entry over the HTTP client's defaults
// (ServerConfig.Unmarshal says why).
func (c *AppServerConfig) Unmarshal(conf *confmap.Conf) error {
	c.ClientConfig = confighttp.NewDefaultClientConfig()
	return conf.Unmarshal(c)
}

const (
	defaultTargetConversations = 4
	defaultAttachRate          = 10
	defaultGrace               = 2 * time.Minute
	defaultRefreshInterval     = 30 * time.Second
	defaultSourceMaxTargets    = 10000
	defaultSourceMaxBytes      = 8 << 20
)

func (c *TargetsConfig) configured() bool {
	return len(c.FileSD)+len(c.HTTPSD)+len(c.RuntimeAPI)+len(c.AppServer) > 0
}

func (c *TargetsConfig) maxConversations() int {
	return cmp.Or(c.MaxConversations, defaultTargetConversations)
}

func (c *TargetsConfig) attachRate() float64 { return cmp.Or(c.AttachRate, defaultAttachRate) }

func (c *TargetsConfig) grace() time.Duration { return cmp.Or(c.Grace, defaultGrace) }

// withDefaults fills the limits left at zero.
func (l SourceLimits) withDefaults() SourceLimits {
	return SourceLimits{
		RefreshInterval: cmp.Or(l.RefreshInterval, defaultRefreshInterval),
		MaxTargets:      cmp.Or(l.MaxTargets, defaultSourceMaxTargets),
		MaxBytes:        cmp.Or(l.MaxBytes, defaultSourceMaxBytes),
	}
}

func (l SourceLimits) validate(prefix string) []error {
	errs := configcheck.Check(configcheck.Duration{Key: prefix + "refresh_interval", Value: l.RefreshInterval})
	if l.MaxTargets < 0 {
		errs = append(errs, fmt.Errorf("%smax_targets: must not be negative (0 is the default, %d)", prefix, defaultSourceMaxTargets))
	}
	if l.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("%smax_bytes: must not be negative (0 is the default, 8 MiB)", prefix))
	}
	return errs
}

func (c *TargetsConfig) validate() []error {
	var errs []error
	for i, f := range c.FileSD {
		prefix := fmt.Sprintf("targets.file_sd[%d].", i)
		if len(f.Files) == 0 {
			errs = append(errs, errors.New(prefix+"files: at least one path or glob is required"))
		}
		for _, pattern := range f.Files {
			if _, err := filepath.Match(pattern, ""); err != nil {
				errs = append(errs, fmt.Errorf("%sfiles: %q: %w", prefix, pattern, err))
			}
		}
		errs = append(errs, f.validate(prefix)...)
	}
	for i, h := range c.HTTPSD {
		errs = append(errs, validateHTTPSource(fmt.Sprintf("targets.http_sd[%d].", i), &h.ClientConfig, h.SourceLimits, endpoint.Validate)...)
	}
	for i, h := range c.RuntimeAPI {
		errs = append(errs, validateHTTPSource(fmt.Sprintf("targets.runtime_api[%d].", i), &h.ClientConfig, h.SourceLimits, validateBase)...)
	}
	for i, h := range c.AppServer {
		errs = append(errs, validateHTTPSource(fmt.Sprintf("targets.app_server[%d].", i), &h.ClientConfig, h.SourceLimits, validateBase)...)
	}
	switch c.Socket {
	case "", socketAuto, socketEvents, socketSession:
	default:
		errs = append(errs, fmt.Errorf("targets.socket: must be auto, events or session, got %q", c.Socket))
	}
	errs = append(errs, configcheck.Check(
		configcheck.Duration{Key: "targets.timeout", Value: c.Timeout},
		configcheck.Duration{Key: "targets.tls.reload_interval", Value: c.TLS.ReloadInterval},
		configcheck.Duration{Key: "targets.grace", Value: c.Grace})...)
	for _, n := range []struct {
		key   string
		value float64
	}{{"max_conversations", float64(c.MaxConversations)}, {"max_targets", float64(c.MaxTargets)}, {"attach_rate", c.AttachRate}} {
		if n.value < 0 {
			errs = append(errs, fmt.Errorf("targets.%s: must not be negative (0 is the default)", n.key))
		}
	}
	if c.SessionAPIKeyDir != "" && !filepath.IsAbs(c.SessionAPIKeyDir) {
		errs = append(errs, errors.New("targets.session_api_key_dir: must be an absolute path"))
	}
	return errs
}

// validateHTTPSource checks a source read over HTTP.
func validateHTTPSource(prefix string, client *confighttp.ClientConfig, l SourceLimits, validEndpoint func(string) error) []error {
	var errs []error
	if err := validEndpoint(client.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("%sendpoint: %w", prefix, err))
	}
	errs = append(errs, configcheck.Check(configcheck.HTTPClientDurations(prefix, client)...)...)
	return append(errs, l.validate(prefix)...)
}

// validateBase accepts a base URL that paths and queries are added to.
func validateBase(s string) error {
	_, err := endpoint.ParseBase(s)
	return err
}
