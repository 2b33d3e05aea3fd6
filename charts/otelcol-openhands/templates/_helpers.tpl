{{/* The release's resources are named after it. */}}
{{- define "otelcol-openhands.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-openhands.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "otelcol-openhands.labels" -}}
{{ include "otelcol-openhands.selectorLabels" . }}
{{ include "otelcol-openhands.commonLabels" . }}
{{- end -}}

{{- define "otelcol-openhands.commonLabels" -}}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Target Allocator's resources: a name of their own (a Service name
is at most 63 characters), and labels the collectors' selector does not
match (the allocator counts every pod it selects as a collector). */}}
{{- define "otelcol-openhands.targetAllocatorName" -}}
{{- printf "%s-targetallocator" (include "otelcol-openhands.fullname" . | trunc 47 | trimSuffix "-") -}}
{{- end -}}

{{- define "otelcol-openhands.targetAllocatorSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-targetallocator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "otelcol-openhands.targetAllocatorLabels" -}}
{{ include "otelcol-openhands.targetAllocatorSelectorLabels" . }}
{{ include "otelcol-openhands.commonLabels" . }}
{{- end -}}

{{/* Where the allocator's Kubernetes service discovery looks: every
namespaces.names of the scrape jobs' kubernetes_sd_configs. A job without
names would look in every namespace; the chart grants only named ones. */}}
{{- define "otelcol-openhands.discoveryNamespaces" -}}
{{- $names := list -}}
{{- range $job := .Values.targetAllocator.scrapeConfigs -}}
{{- range $sd := (get $job "kubernetes_sd_configs" | default list) -}}
{{- $ns := dig "namespaces" "names" list $sd -}}
{{- if and (not $ns) (not (dig "namespaces" "own_namespace" false $sd)) -}}
{{- fail (printf "targetAllocator.scrapeConfigs %s: kubernetes_sd_configs must name its namespaces (namespaces.names); the chart grants the allocator only those" (get $job "job_name")) -}}
{{- end -}}
{{- $names = concat $names $ns -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{/*
The collector's configuration: values.config with, by default, the
receiver's shard (the pod ordinal of SHARD_INDEX, count = replicas); with
the Target Allocator, no shard and no static servers (every replica would
observe them) but one http_sd per scrape job, asking for this pod's share.
*/}}
{{- define "otelcol-openhands.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $openhands := required "config.receivers.openhands is required" (dig "receivers" "openhands" nil $config) -}}
{{- if .Values.targetAllocator.enabled -}}
{{- if hasKey $openhands "shard" -}}
{{- fail "config.receivers.openhands.shard: leave it out with targetAllocator.enabled (the allocator shares the servers out)" -}}
{{- end -}}
{{- $_ := unset $openhands "servers" -}}
{{- $targets := get $openhands "targets" | default dict -}}
{{- $httpSD := get $targets "http_sd" | default list -}}
{{- $allocator := include "otelcol-openhands.targetAllocatorName" . -}}
{{- if not .Values.targetAllocator.scrapeConfigs -}}
{{- fail "targetAllocator.scrapeConfigs: name how the allocator discovers the agent servers" -}}
{{- end -}}
{{- range $job := .Values.targetAllocator.scrapeConfigs -}}
{{- $name := required "targetAllocator.scrapeConfigs: every job needs a job_name" (get $job "job_name") -}}
{{- if not (regexMatch "^[A-Za-z0-9_-]+$" $name) -}}
{{- fail (printf "targetAllocator.scrapeConfigs: job_name %q: letters, digits, _ and - only (it is a path segment of the collectors' http_sd)" $name) -}}
{{- end -}}
{{- $httpSD = append $httpSD (dict "endpoint" (printf "http://%s/jobs/%s/targets?collector_id=${env:POD_NAME}" $allocator $name) "refresh_interval" $.Values.targetAllocator.refreshInterval) -}}
{{- end -}}
{{- $_ := set $targets "http_sd" $httpSD -}}
{{- with .Values.targetAllocator.sessionKeysSecret -}}
{{- $_ := set $targets "session_api_key_dir" (include "otelcol-openhands.sessionKeysDir" $) -}}
{{- end -}}
{{- $_ := set $openhands "targets" $targets -}}
{{- else -}}
{{- $_ := set $openhands "shard" (dict "index" "${env:SHARD_INDEX}" "count" (int .Values.replicas)) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* Where the collectors find the agent servers' key files
(targetAllocator.sessionKeysSecret). */}}
{{- define "otelcol-openhands.sessionKeysDir" -}}
/var/run/secrets/openhands
{{- end -}}

{{/* The Target Allocator's configuration: the collectors are the
StatefulSet's pods (its selector, in the release's namespace). */}}
{{- define "otelcol-openhands.targetAllocatorConfig" -}}
{{- $ta := .Values.targetAllocator -}}
{{- dict
    "collector_namespace" .Release.Namespace
    "collector_selector" (dict "matchLabels" (include "otelcol-openhands.selectorLabels" . | fromYaml))
    "allocation_strategy" $ta.allocationStrategy
    "filter_strategy" $ta.filterStrategy
    "config" (dict "scrape_configs" $ta.scrapeConfigs)
  | toYaml -}}
{{- end -}}
