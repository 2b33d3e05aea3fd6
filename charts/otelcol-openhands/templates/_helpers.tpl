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
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The collector's configuration: values.config with the receiver's shard
(the pod ordinal of SHARD_INDEX, count = replicas) unless shardByOrdinal
is false.
*/}}
{{- define "otelcol-openhands.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $openhands := required "config.receivers.openhands is required" (dig "receivers" "openhands" nil $config) -}}
{{- if .Values.shardByOrdinal -}}
{{- $_ := set $openhands "shard" (dict "index" "${env:SHARD_INDEX}" "count" (int .Values.replicas)) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}
