package targets

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The OpenHands control planes list their agent servers in their own
// forms; these read one answer into groups, one per server, its key in
// LabelKey (a control plane hands each server's key with its URL).

// runtimeList is the runtime API's GET {api_url}/list answer (the
// RemoteRuntime protocol: every runtime, for all users).
type runtimeList struct {
	Runtimes []struct {
		RuntimeID     string `json:"runtime_id"`
		SessionID     string `json:"session_id"`
		URL           string `json:"url"`
		SessionAPIKey string `json:"session_api_key"`
		Status        string `json:"status"`
	} `json:"runtimes"`
}

// RuntimeList reads a runtime API /list answer: its running runtimes
// with a URL. A runtime's session_id is the app server's sandbox id.
func RuntimeList(data []byte, lim Limits) ([]Group, error) {
	var list runtimeList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("not a runtime list: %w", err)
	}
	if len(list.Runtimes) > lim.MaxTargets {
		return nil, fmt.Errorf("lists more than %d runtimes", lim.MaxTargets)
	}
	var groups []Group
	for _, r := range list.Runtimes {
		if !strings.EqualFold(r.Status, "running") || r.URL == "" {
			continue
		}
		groups = append(groups, serverGroup(r.URL, r.SessionAPIKey, map[string]string{
			"runtime_id": r.RuntimeID, "sandbox_id": r.SessionID}))
	}
	return groups, lim.check(groups)
}

// sandboxPage is one page of the app server's GET
// /api/v1/sandboxes/search (SandboxPage).
type sandboxPage struct {
	Items []struct {
		ID              string `json:"id"`
		CreatedByUserID string `json:"created_by_user_id"`
		SandboxSpecID   string `json:"sandbox_spec_id"`
		Status          string `json:"status"`
		SessionAPIKey   string `json:"session_api_key"`
		ExposedURLs     []struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"exposed_urls"`
	} `json:"items"`
	NextPageID *string `json:"next_page_id"`
}

// SandboxPage reads one page of an app server's sandbox search: its
// RUNNING sandboxes (only those carry their AGENT_SERVER URL and key),
// and the next page's id ("" on the last).
func SandboxPage(data []byte, lim Limits) (groups []Group, next string, err error) {
	var page sandboxPage
	if err := json.Unmarshal(data, &page); err != nil {
		return nil, "", fmt.Errorf("not a sandbox page: %w", err)
	}
	if len(page.Items) > lim.MaxTargets {
		return nil, "", fmt.Errorf("lists more than %d sandboxes", lim.MaxTargets)
	}
	for _, sb := range page.Items {
		if sb.Status != "RUNNING" {
			continue
		}
		for _, u := range sb.ExposedURLs {
			if u.Name == "AGENT_SERVER" && u.URL != "" {
				groups = append(groups, serverGroup(u.URL, sb.SessionAPIKey, map[string]string{
					"sandbox_id": sb.ID, "user_id": sb.CreatedByUserID, "sandbox_spec_id": sb.SandboxSpecID}))
				break
			}
		}
	}
	if page.NextPageID != nil {
		next = *page.NextPageID
	}
	return groups, next, lim.check(groups)
}

// serverGroup is the group of one server; labels left empty are left out.
func serverGroup(url, key string, labels map[string]string) Group {
	g := Group{Targets: []string{url}, Labels: map[string]string{}}
	for k, v := range labels {
		if v != "" {
			g.Labels[k] = v
		}
	}
	if key != "" {
		g.Labels[LabelKey] = key
	}
	return g
}
