package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/otelcol-openhands/otelcol-openhands/internal/aep/schemas"
)

// baseURL is the prefix of the embedded schemas' $id values; each file is
// registered under baseURL + its path so ids and locations agree.
const baseURL = "aep://schemas/0.1/"

const typesRegistryPath = "registry/types.json"

// validator holds the compiled schemas (immutable) and a cache of valid
// sources; it is safe for concurrent use.
type validator struct {
	envelope *jsonschema.Schema
	// payloads maps an event type to its payload schema; registered types
	// without one (and unregistered or vendor types) are absent.
	payloads map[string]payloadSchema
	// uri is the schema library's uri format, the one the envelope asserts
	// on source; the native envelope checks call it rather than mirror it.
	uri func(any) error
	// knownSources are sources that passed uri (sourceURI).
	knownSources     sync.Map
	knownSourceCount atomic.Int64
}

// payloadSchema is a payload schema and, where its keywords allow, its
// native check (nil otherwise).
type payloadSchema struct {
	library *jsonschema.Schema
	check   *payloadCheck
}

// compiled compiles every schema once, on first use.
var compiled = sync.OnceValues(compile)

// typesRegistry is the part of registry/types.json validation needs.
type typesRegistry struct {
	Types []struct {
		Type   string  `json:"type"`
		Schema *string `json:"schema"`
	} `json:"types"`
}

func compile() (*validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// The schemas use format date-time (time, expires_at) and uri (source);
	// 2020-12 treats formats as annotations unless asked to assert them.
	c.AssertFormat()

	raw, err := schemas.FS.ReadFile(typesRegistryPath)
	if err != nil {
		return nil, fmt.Errorf("aep schema: read %s: %w", typesRegistryPath, err)
	}
	var reg typesRegistry
	if err := json.Unmarshal(raw, &reg); err != nil {
		return nil, fmt.Errorf("aep schema: parse %s: %w", typesRegistryPath, err)
	}

	envelope, err := compileFile(c, schemas.EnvelopePath)
	if err != nil {
		return nil, err
	}
	source := envelope.Properties["source"]
	if source == nil || source.Format == nil || source.Format.Name != "uri" {
		return nil, fmt.Errorf("aep schema: %s: source has no uri format", schemas.EnvelopePath)
	}
	v := &validator{envelope: envelope, payloads: make(map[string]payloadSchema, len(reg.Types)),
		uri: source.Format.Validate}
	for _, t := range reg.Types {
		if t.Schema == nil {
			continue
		}
		sch, err := compileFile(c, "types/"+*t.Schema)
		if err != nil {
			return nil, fmt.Errorf("aep schema: payload of registered type %s: %w", t.Type, err)
		}
		check, _ := compilePayload(sch)
		v.payloads[t.Type] = payloadSchema{library: sch, check: check}
	}
	return v, nil
}

func compileFile(c *jsonschema.Compiler, path string) (*jsonschema.Schema, error) {
	raw, err := schemas.FS.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("aep schema: read %s: %w", path, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("aep schema: parse %s: %w", path, err)
	}
	if err := c.AddResource(baseURL+path, doc); err != nil {
		return nil, fmt.Errorf("aep schema: add %s: %w", path, err)
	}
	sch, err := c.Compile(baseURL + path)
	if err != nil {
		return nil, fmt.Errorf("aep schema: compile %s: %w", path, err)
	}
	return sch, nil
}
