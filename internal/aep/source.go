package aep

import "net/url"

// SessionSource is the RECOMMENDED session-scoped source,
// aep://{host}/agent/{agent}/session/{session}, agent and session
// path-escaped; host is the emitter's authority (host or host:port).
func SessionSource(host, agent, session string) string {
	return "aep://" + host + "/agent/" + url.PathEscape(agent) + "/session/" + url.PathEscape(session)
}
