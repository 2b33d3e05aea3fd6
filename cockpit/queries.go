package cockpit

import (
	"fmt"
	"regexp"
	"strings"
)

// Query is one PromQL expression of the bundle and where it is. Labels
// are labels the bundle names outside the expression (a dashboard
// variable's label_values).
type Query struct {
	Where  string
	Expr   string
	Labels []string
}

// grafanaVariables stand for what Grafana substitutes before it sends a
// query: a range for the interval, a regex for a variable.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*), *([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// Queries is every PromQL expression of the bundle: the rules', the
// dashboards' panels' and their variables', with Grafana's variables
// replaced so that Prometheus' parser reads them as Grafana would send
// them.
func Queries(p Params) ([]Query, error) {
	var out []Query
	for _, g := range Rules(p).Groups {
		for _, r := range g.Rules {
			out = append(out, Query{Where: fmt.Sprintf("rule %s%s", r.Record, r.Alert), Expr: r.Expr})
		}
	}
	for _, d := range []Dashboard{Agents(p), Collector()} {
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				return nil, fmt.Errorf("dashboard %s, variable %s: %q is not label_values(metric, label)", d.UID, v.Name, v.Definition)
			}
			out = append(out, Query{Where: fmt.Sprintf("dashboard %s, variable %s", d.UID, v.Name), Expr: m[1], Labels: []string{m[2]}})
		}
		for _, panel := range d.Panels {
			for _, t := range panel.Targets {
				if t.Expr == "" {
					continue // a traces query
				}
				out = append(out, Query{
					Where: fmt.Sprintf("dashboard %s, panel %q, target %s", d.UID, panel.Title, t.RefID),
					Expr:  grafanaVariables.Replace(t.Expr),
				})
			}
		}
	}
	return out, nil
}
