package aeprelayexporter // import "github.com/otelcol-openhands/otelcol-openhands/exporter/aeprelayexporter"

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
)

// Transport names the relay binding events travel on.
type Transport string

const (
	// TransportWebSocket is the duplex binding (AEP-0003 §2): batches are
	// confirmed by a ping/pong round trip and commands can reach the agent.
	TransportWebSocket Transport = "websocket"
	// TransportHTTP is POST {endpoint}/events (AEP-0003 §3.2): emit only.
	TransportHTTP Transport = "http"
)

// Config is the aeprelay exporter's configuration.
type Config struct {
	// ClientConfig carries endpoint (the relay's http/https base URL), tls,
	// headers, auth and proxy_url for both bindings; timeout bounds one push
	// attempt (exporterhelper's per-attempt timeout). compression and the
	// connection-pool keys apply to the HTTP binding only.
	confighttp.ClientConfig `mapstructure:",squash"`
	// QueueConfig is exporterhelper's sending queue (num_consumers 1 by
	// default, so events leave in the order the receiver emitted them).
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig is exporterhelper's retry of failed pushes.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	// Transport is websocket (default) or http.
	Transport Transport `mapstructure:"transport"`
	// Token is sent as "Authorization: Bearer <token>" (the relay's
	// AEP_TOKEN). Use either token or auth.
	Token configopaque.String `mapstructure:"token"`
	// Agent is the AEP agent identity whose WebSocket link is opened at
	// start, kept open and the only one commands reach. Events of other
	// agents travel on links of their own (AEP-0003 §8: one identity per
	// connection).
	Agent string `mapstructure:"agent"`
	// Instance disambiguates this process in the hello; empty means
	// "<hostname>/<pid>".
	Instance string `mapstructure:"instance"`
	// Emits is the hello's routing hint: the categories this agent emits.
	Emits []string `mapstructure:"emits"`
	// MaxCapture, when set, down-levels every event above it before it
	// leaves (AEP-0001 §8.2).
	MaxCapture aep.Capture `mapstructure:"max_capture"`
	// Control names the extension that accepts commands (see
	// ControlHandler); without it the hello declares accepts: [].
	Control *component.ID `mapstructure:"control"`
	// HelloTimeout bounds the dial plus the wait for the relay's hello.
	HelloTimeout time.Duration `mapstructure:"hello_timeout"`
	// ConfirmTimeout bounds the wait for the pong that confirms a batch.
	ConfirmTimeout time.Duration `mapstructure:"confirm_timeout"`
	// PingInterval is the idle keepalive; a connection silent for three
	// intervals is dropped and redialled.
	PingInterval time.Duration `mapstructure:"ping_interval"`
	// Reconnect is the WebSocket redial backoff.
	Reconnect backoff.Config `mapstructure:"reconnect"`
	// MaxLinks bounds the WebSocket links open at once, the agent's own
	// included; 1 carries the agent's events only.
	MaxLinks int `mapstructure:"max_links"`
	// LinkIdleTimeout closes the link of another agent that carried no
	// event for this long.
	LinkIdleTimeout time.Duration `mapstructure:"link_idle_timeout"`

	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the settings this exporter owns; confmap validates the
// nested collector configs (sending_queue, retry_on_failure, tls) and
// prefixes their messages with their keys.
func (cfg *Config) Validate() error {
	var errs []error
	if err := endpoint.Validate(cfg.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint: %w", err))
	}
	switch cfg.Transport {
	case TransportWebSocket, TransportHTTP:
	default:
		errs = append(errs, fmt.Errorf("transport: must be %q or %q, got %q", TransportWebSocket, TransportHTTP, cfg.Transport))
	}
	if cfg.Token != "" && cfg.Auth.HasValue() {
		errs = append(errs, errors.New("token: set either token or auth, not both"))
	}
	if cfg.Agent == "" {
		errs = append(errs, errors.New("agent: must not be empty"))
	}
	if cfg.MaxLinks < 1 {
		errs = append(errs, fmt.Errorf("max_links: must be at least 1 (the link of agent), got %d", cfg.MaxLinks))
	}
	if cfg.MaxCapture != "" && cfg.MaxCapture.Rank() < 0 {
		errs = append(errs, fmt.Errorf("max_capture: unknown level %q (want none, metadata, redacted or full)", cfg.MaxCapture))
	}
	if cfg.Control != nil && cfg.Transport == TransportHTTP {
		errs = append(errs, errors.New("control: needs transport websocket (the HTTP binding cannot receive commands)"))
	}
	errs = append(errs, configcheck.Check(append(configcheck.HTTPClientDurations("", &cfg.ClientConfig),
		configcheck.Duration{Key: "timeout", Value: cfg.Timeout, Positive: true},
		configcheck.Duration{Key: "hello_timeout", Value: cfg.HelloTimeout, Positive: true},
		configcheck.Duration{Key: "confirm_timeout", Value: cfg.ConfirmTimeout, Positive: true},
		configcheck.Duration{Key: "ping_interval", Value: cfg.PingInterval, Positive: true},
		configcheck.Duration{Key: "link_idle_timeout", Value: cfg.LinkIdleTimeout, Positive: true})...)...)
	if err := cfg.Reconnect.Validate("reconnect"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// credentials names what authenticates this exporter's link to the relay:
// the token, an auth extension, an Authorization header, or the
// endpoint's access_token (the relay's query fallback, which is sent).
// One list decides both what a plaintext hop would expose and whether
// commands arrive over an authenticated link. An empty credential is none
// (`?access_token=${env:UNSET}`, `Authorization: "Bearer "`): it would make
// a link that proves nothing look authenticated, so that a tokenless,
// hostile relay's commands would be executed.
func (cfg *Config) credentials() []string {
	var carried []string
	if !blank(string(cfg.Token)) {
		carried = append(carried, "token")
	}
	if cfg.Auth.HasValue() {
		carried = append(carried, "auth")
	}
	for name, value := range cfg.Headers.Iter {
		if http.CanonicalHeaderKey(name) == "Authorization" && authorizes(string(value)) {
			carried = append(carried, "Authorization header")
			break
		}
	}
	if u, err := url.Parse(cfg.Endpoint); err == nil && !blank(u.Query().Get("access_token")) {
		carried = append(carried, "access_token")
	}
	return carried
}

// authorizes reports whether an Authorization value carries a credential
// after its scheme ("Bearer <token>"): a scheme alone proves nothing.
func authorizes(value string) bool {
	_, credential, _ := strings.Cut(strings.TrimSpace(value), " ")
	return !blank(credential)
}

func blank(s string) bool {
	return strings.TrimSpace(s) == ""
}
