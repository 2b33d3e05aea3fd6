package openhandsreceiver // import "github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep"
	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/capture"
	"github.com/otelcol-openhands/otelcol-openhands/internal/backoff"
	"github.com/otelcol-openhands/otelcol-openhands/internal/configcheck"
	"github.com/otelcol-openhands/otelcol-openhands/internal/endpoint"
	"github.com/otelcol-openhands/otelcol-openhands/receiver/openhandsreceiver/internal/mapping"
)

// Config is the openhands receiver's configuration.
type Config struct {
	// Servers are the agent servers to observe.
	Servers []ServerConfig `mapstructure:"servers"`
	// Targets are agent servers discovered by sources (file_sd, http_sd,
	// the OpenHands runtime API and app server).
	Targets TargetsConfig `mapstructure:"targets"`
	// PollInterval is the conversation search cadence.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// StartAt is what is read of a conversation's history that exists when
	// it is first seen at a start (startAtBeginning, startAtEnd): one first
	// listed by the start's first discovery round, with no state in
	// storage.
	StartAt string `mapstructure:"start_at"`
	// RecheckInterval is how often the whole listing is read again (10
	// pages a round), which shows a status change that moved no
	// updated_at, and a deletion the count hid; 0 never rechecks.
	RecheckInterval time.Duration `mapstructure:"recheck_interval"`
	// Agent is the AEP agent identity (and resource service.name).
	Agent string `mapstructure:"agent"`
	// Deltas opts in to StreamingDeltaEvent (x.openhands.streaming.delta).
	Deltas bool `mapstructure:"deltas"`
	// Capture is the ceiling applied at the source (AEP-0003 §9).
	Capture CaptureConfig `mapstructure:"capture"`
	// SecretNames are extra object keys whose values are always redacted.
	SecretNames []string `mapstructure:"secret_names"`
	// SecretEnv names environment variables whose values are redacted
	// wherever they appear (AEP-0003 §9.4 b).
	SecretEnv []string `mapstructure:"secret_env"`
	// RedactPII turns the PII step of the redaction pipeline on (default).
	RedactPII bool `mapstructure:"redact_pii"`
	// IdleDetach closes the socket of a conversation whose status has been
	// terminal or idle, unchanged, for this long, so the server may evict it.
	IdleDetach time.Duration `mapstructure:"idle_detach"`
	// Reconnect is the socket reconnect backoff.
	Reconnect backoff.Config `mapstructure:"reconnect"`
	// MaxFrameBytes bounds one inbound WebSocket frame.
	MaxFrameBytes int64 `mapstructure:"max_frame_bytes"`
	// Storage is the id of a storage extension (e.g. file_storage) that
	// keeps each conversation's state across restarts; nil keeps none.
	Storage *component.ID `mapstructure:"storage"`
	// Shard picks this replica's share of the conversations.
	Shard ShardConfig `mapstructure:"shard"`
	// Control names the openhandscontrol extension this receiver registers
	// its conversations with; without it no command can reach them.
	Control *component.ID `mapstructure:"control"`
	// Webhook is the sink the servers' webhooks POST to (their config's
	// webhooks[].base_url names it); absent, no listener is opened.
	Webhook configoptional.Optional[WebhookConfig] `mapstructure:"webhook"`

	_ struct{}
}

// WebhookConfig is the webhook sink: the listener (endpoint, TLS, limits
// such as max_request_body_size) for the event batches and
// ConversationInfo snapshots the agent servers push. A POST is taken from
// the server whose session_api_key it carries.
type WebhookConfig struct {
	confighttp.ServerConfig `mapstructure:",squash"`
	// Only observes through the webhook alone: no conversation sockets.
	// Events come from the pushes, and what the server dropped from them
	// (it drops the oldest under pressure) is read from events/search.
	Only bool `mapstructure:"only"`

	_ struct{}
}

// ServerConfig is one agent server.
type ServerConfig struct {
	// ClientConfig carries endpoint (http/https base URL), TLS, timeout,
	// headers and proxy for the REST calls and the socket dial.
	confighttp.ClientConfig `mapstructure:",squash"`
	// SessionAPIKey is sent as X-Session-API-Key on REST and in the socket's
	// first-message auth frame. Optional: servers without keys accept all.
	SessionAPIKey configopaque.String `mapstructure:"session_api_key"`
	// Name labels the server in logs, metrics and the resource.
	Name string `mapstructure:"name"`
	// Socket picks the conversation socket: session (/sockets/session, the
	// seq-numbered endpoint of servers v1.45.0+), events (the legacy
	// /sockets/events every release serves), or auto (default): session
	// where the server has it, else events.
	Socket string `mapstructure:"socket"`
	// MaxConversations bounds the conversations attached at once (one
	// socket each); 0 is defaultMaxConversations, or the process's
	// descriptor budget if smaller (connectionBudget). The rest wait for a
	// slot.
	MaxConversations int `mapstructure:"max_conversations"`
}

// Unmarshal reads a server entry over the HTTP client's defaults, which an
// entry of a list does not otherwise get: without them keep-alives are off,
// and every poll would cost the agent server a new TCP (and TLS)
// handshake. `keepalive: {enabled: false}` still turns them off.
func (s *ServerConfig) Unmarshal(conf *confmap.Conf) error {
	s.ClientConfig = confighttp.NewDefaultClientConfig()
	return conf.Unmarshal(s)
}

// What start_at reads of the history a conversation has when a start
// first sees it.
const (
	startAtBeginning = "beginning" // all of it
	startAtEnd       = "end"       // none: from its first attach on
)

// CaptureConfig is the capture ceiling: a level and per-category overrides
// (e.g. attention: redacted, as AEP-0003 §9.1 recommends).
type CaptureConfig struct {
	Level      aep.Capture            `mapstructure:"level"`
	Categories map[string]aep.Capture `mapstructure:"categories"`
}

// validate checks the ceiling; newReceiver runs it again, for a
// configuration that reached the factory unvalidated.
func (c CaptureConfig) validate() error {
	return errors.Join(capture.CheckCeiling("capture", c.Level, c.Categories)...)
}

// Validate checks the configuration; every message names its key.
func (cfg *Config) Validate() error {
	var errs []error
	if len(cfg.Servers) == 0 && !cfg.Targets.configured() {
		errs = append(errs, errors.New("servers: at least one server, or a targets source, is required"))
	}
	errs = append(errs, cfg.Targets.validate()...)
	errs = append(errs, cfg.validateEndpoints()...)
	for i, s := range cfg.Servers {
		prefix := fmt.Sprintf("servers[%d].", i)
		errs = append(errs, configcheck.Check(append(configcheck.HTTPClientDurations(prefix, &s.ClientConfig),
			configcheck.Duration{Key: prefix + "timeout", Value: s.Timeout})...)...)
		switch s.Socket {
		case "", socketAuto, socketEvents, socketSession:
		default:
			errs = append(errs, fmt.Errorf("servers[%d].socket: must be auto, events or session, got %q", i, s.Socket))
		}
		if s.MaxConversations < 0 {
			errs = append(errs, fmt.Errorf("servers[%d].max_conversations: must not be negative (0 is the default, 1000 or the descriptor budget)", i))
		}
	}
	errs = append(errs, configcheck.Check(
		configcheck.Duration{Key: "poll_interval", Value: cfg.PollInterval, Positive: true},
		configcheck.Duration{Key: "recheck_interval", Value: cfg.RecheckInterval},
		configcheck.Duration{Key: "idle_detach", Value: cfg.IdleDetach})...)
	if cfg.StartAt != startAtBeginning && cfg.StartAt != startAtEnd {
		errs = append(errs, fmt.Errorf("start_at: must be beginning or end, got %q", cfg.StartAt))
	}
	if cfg.Agent == "" {
		errs = append(errs, errors.New("agent: must not be empty"))
	}
	errs = append(errs, cfg.Capture.validate())
	if err := cfg.Reconnect.Validate("reconnect"); err != nil {
		errs = append(errs, err)
	}
	if cfg.MaxFrameBytes < 1024 {
		errs = append(errs, errors.New("max_frame_bytes: must be at least 1024"))
	}
	if err := cfg.Shard.validate(); err != nil {
		errs = append(errs, fmt.Errorf("shard.%w", err))
	}
	errs = append(errs, cfg.validateWebhook()...)
	return errors.Join(errs...)
}

// mappingConfig is the mapping configuration of one conversation's session
// in generation epoch.
func (r *openhandsReceiver) mappingConfig(hostPort, conversationID string, epoch int64) mapping.Config {
	return mapping.Config{
		Agent:          r.cfg.Agent,
		Source:         sessionSource(hostPort, r.cfg.Agent, conversationID, epoch),
		ServerHost:     hostPort,
		ConversationID: conversationID,
		Ceiling: mapping.CapturePolicy{
			Default:    r.cfg.Capture.Level,
			Categories: r.cfg.Capture.Categories,
		},
		Deltas:            r.cfg.Deltas,
		Redactor:          r.redactor,
		NewStreamRedactor: func() mapping.StreamRedactor { return r.redactor.Stream() },
	}
}

// validateWebhook checks the sink: a push is told from a forgery, and its
// server from the others, only by the session key it carries, so every
// server needs one of its own.
func (cfg *Config) validateWebhook() []error {
	if !cfg.Webhook.HasValue() {
		return nil
	}
	hook := cfg.Webhook.Get()
	var errs []error
	if cfg.Targets.configured() {
		// A push is told apart by the key of a configured server.
		errs = append(errs, errors.New("webhook: not supported with targets sources; a push names its server by a configured key"))
	}
	if hook.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("webhook.endpoint: must not be empty"))
	}
	if hook.MaxRequestBodySize < 0 {
		errs = append(errs, errors.New("webhook.max_request_body_size: must not be negative (0 is the default, 20 MiB)"))
	}
	errs = append(errs, configcheck.Check(
		configcheck.Duration{Key: "webhook.read_timeout", Value: hook.ReadTimeout},
		configcheck.Duration{Key: "webhook.read_header_timeout", Value: hook.ReadHeaderTimeout},
		configcheck.Duration{Key: "webhook.write_timeout", Value: hook.WriteTimeout})...)
	first := make(map[configopaque.String]int, len(cfg.Servers))
	for i, s := range cfg.Servers {
		if s.SessionAPIKey == "" {
			errs = append(errs, fmt.Errorf("servers[%d].session_api_key: required with webhook: a push is accepted only with a configured server's key", i))
			continue
		}
		if j, dup := first[s.SessionAPIKey]; dup {
			errs = append(errs, fmt.Errorf("servers[%d].session_api_key: the same key as servers[%d]; with webhook each server's key must tell its pushes apart", i, j))
			continue
		}
		first[s.SessionAPIKey] = i
	}
	return errs
}

// validateEndpoints checks each server's endpoint and refuses two that
// name one server (http://h:80 and http://h/, say): both would attach the
// same conversations as one AEP source, two sockets feeding one session.
func (cfg *Config) validateEndpoints() []error {
	var errs []error
	first := make(map[string]int, len(cfg.Servers))
	for i, s := range cfg.Servers {
		u, err := endpoint.ParseBase(s.Endpoint)
		if err != nil {
			errs = append(errs, fmt.Errorf("servers[%d].endpoint: %w", i, err))
			continue
		}
		key := endpoint.Key(u)
		if j, dup := first[key]; dup {
			errs = append(errs, fmt.Errorf("servers[%d].endpoint: the same server as servers[%d].endpoint (%s)", i, j, key))
			continue
		}
		first[key] = i
	}
	return errs
}
