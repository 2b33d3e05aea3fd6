package cockpit

// The subset of Grafana's dashboard JSON model (schemaVersion 39) the
// cockpit uses: enough for file provisioning and the dashboard import,
// with every datasource a variable so that no instance's UID is baked in.

type Dashboard struct {
	UID           string      `json:"uid"`
	Title         string      `json:"title"`
	Description   string      `json:"description"`
	Tags          []string    `json:"tags"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Time          TimeRange   `json:"time"`
	Timezone      string      `json:"timezone"`
	Templating    Templating  `json:"templating"`
	Annotations   Annotations `json:"annotations"`
	Links         []Link      `json:"links"`
	Panels        []Panel     `json:"panels"`
	Version       int         `json:"version"`
}

type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Annotations are the dashboard's annotation queries; the cockpit has
// none of its own.
type Annotations struct {
	List []any `json:"list"`
}

type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a datasource variable (Type "datasource", Query the plugin
// id) or a query variable over label values.
type Variable struct {
	Name       string      `json:"name"`
	Label      string      `json:"label"`
	Type       string      `json:"type"`
	Query      any         `json:"query"`
	Datasource *Datasource `json:"datasource,omitempty"`
	Definition string      `json:"definition,omitempty"`
	Refresh    int         `json:"refresh"`
	Regex      string      `json:"regex,omitempty"`
	IncludeAll bool        `json:"includeAll"`
	AllValue   string      `json:"allValue,omitempty"`
	Multi      bool        `json:"multi"`
	Sort       int         `json:"sort,omitempty"`
	Hide       int         `json:"hide"`
	Current    Current     `json:"current"`
}

// Current is a variable's selection when the dashboard opens.
type Current struct {
	Text  any `json:"text"`
	Value any `json:"value"`
}

type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type Link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Icon        string   `json:"icon"`
	Tooltip     string   `json:"tooltip"`
	URL         string   `json:"url"`
	Tags        []string `json:"tags"`
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
	TargetBlank bool     `json:"targetBlank"`
}

type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     GridPos        `json:"gridPos"`
	Datasource  *Datasource    `json:"datasource,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
	FieldConfig *FieldConfig   `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	// Panels are a collapsed row's; a row has the list, empty when open.
	Panels *[]Panel `json:"panels,omitempty"`
}

// Target is one query: PromQL (Expr) or TraceQL (Query, QueryType
// "traceql").
type Target struct {
	RefID        string      `json:"refId"`
	Datasource   *Datasource `json:"datasource,omitempty"`
	Expr         string      `json:"expr,omitempty"`
	LegendFormat string      `json:"legendFormat,omitempty"`
	Instant      bool        `json:"instant,omitempty"`
	Range        bool        `json:"range,omitempty"`
	Format       string      `json:"format,omitempty"`
	QueryType    string      `json:"queryType,omitempty"`
	Query        string      `json:"query,omitempty"`
	TableType    string      `json:"tableType,omitempty"`
	Limit        int         `json:"limit,omitempty"`
	Filters      *[]any      `json:"filters,omitempty"`
}

type FieldConfig struct {
	Defaults  FieldDefaults   `json:"defaults"`
	Overrides []FieldOverride `json:"overrides"`
}

type FieldDefaults struct {
	Unit  string     `json:"unit,omitempty"`
	Min   *float64   `json:"min,omitempty"`
	Max   *float64   `json:"max,omitempty"`
	Links []DataLink `json:"links,omitempty"`
}

type FieldOverride struct {
	Matcher    Matcher    `json:"matcher"`
	Properties []Property `json:"properties"`
}

type Matcher struct {
	ID      string `json:"id"`
	Options string `json:"options"`
}

type Property struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

type DataLink struct {
	Title       string `json:"title"`
	URL         string `json:"url"`
	TargetBlank bool   `json:"targetBlank,omitempty"`
}
