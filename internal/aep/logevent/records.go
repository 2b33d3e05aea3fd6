package logevent

import "go.opentelemetry.io/collector/pdata/plog"

// RecordRef locates one log record of a plog.Logs: the exporters keep it
// for each event so that a retry carries only the records still to send.
type RecordRef struct{ Resource, Scope, Record int }

// RecordsOf copies the records refs point at, in refs' order, into new
// Logs that keep their resources and scopes.
func RecordsOf(ld plog.Logs, refs []RecordRef) plog.Logs {
	out := plog.NewLogs()
	var rl plog.ResourceLogs
	var sl plog.ScopeLogs
	lastResource, lastScope := -1, -1
	for _, ref := range refs {
		srcResource := ld.ResourceLogs().At(ref.Resource)
		if ref.Resource != lastResource {
			rl = out.ResourceLogs().AppendEmpty()
			srcResource.Resource().CopyTo(rl.Resource())
			rl.SetSchemaUrl(srcResource.SchemaUrl())
			lastResource, lastScope = ref.Resource, -1
		}
		srcScope := srcResource.ScopeLogs().At(ref.Scope)
		if ref.Scope != lastScope {
			sl = rl.ScopeLogs().AppendEmpty()
			srcScope.Scope().CopyTo(sl.Scope())
			sl.SetSchemaUrl(srcScope.SchemaUrl())
			lastScope = ref.Scope
		}
		srcScope.LogRecords().At(ref.Record).CopyTo(sl.LogRecords().AppendEmpty())
	}
	return out
}
