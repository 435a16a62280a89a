{{/* Names and labels. */}}
{{- define "meshbridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "meshbridge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "meshbridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "meshbridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "meshbridge.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "meshbridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: bridge
{{- end -}}

{{- define "meshbridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "meshbridge.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "meshbridge.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
meshbridge.config is the configuration written to config.yaml, as YAML:
.Values.config with the keys the chart sets merged over it (every other key
of the user's passes through unchanged):
  xds.address        0.0.0.0:<ports.xds>
  http.address       0.0.0.0:<ports.http>
  http.debugAddress  127.0.0.1:<ports.debug> (loopback: kubectl port-forward)
  output.namespace   the release's namespace when "" or left out
  mcp.address        0.0.0.0:<ports.mcp>, with mcp.enabled and ports.mcp
*/}}
{{- define "meshbridge.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $ns := dig "output" "namespace" "" $cfg | default .Release.Namespace -}}
{{- $set := dict
  "xds" (dict "address" (printf "0.0.0.0:%d" (int .Values.ports.xds)))
  "http" (dict "address" (printf "0.0.0.0:%d" (int .Values.ports.http)) "debugAddress" (printf "127.0.0.1:%d" (int .Values.ports.debug)))
  "output" (dict "namespace" $ns) -}}
{{- if and (dig "mcp" "enabled" false $cfg) (int .Values.ports.mcp) -}}
{{- $_ := set $set "mcp" (dict "address" (printf "0.0.0.0:%d" (int .Values.ports.mcp))) -}}
{{- end -}}
{{- toYaml (mergeOverwrite $cfg $set) -}}
{{- end -}}

{{/* output.namespace of meshbridge.config: where the bridge writes. */}}
{{- define "meshbridge.outputNamespace" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- $cfg.output.namespace -}}
{{- end -}}

{{/* The Lease's namespace: kubernetes.leaderElection.leaseNamespace, else output.namespace. */}}
{{- define "meshbridge.leaseNamespace" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- dig "kubernetes" "leaderElection" "leaseNamespace" "" $cfg | default $cfg.output.namespace -}}
{{- end -}}

{{/* "true" when the bridge writes to Kubernetes (kubernetes.enabled), else "". */}}
{{- define "meshbridge.kubernetesEnabled" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- if dig "kubernetes" "enabled" false $cfg -}}true{{- end -}}
{{- end -}}

{{/* "true" when the writer campaigns for a Lease (kubernetes.leaderElection.enabled defaults to true), else "". */}}
{{- define "meshbridge.leaderElection" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- if and (dig "kubernetes" "enabled" false $cfg) (dig "kubernetes" "leaderElection" "enabled" true $cfg) -}}true{{- end -}}
{{- end -}}

{{/* meshbridge.validate fails the render on values the pod could not run with. */}}
{{- define "meshbridge.validate" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- if not $cfg.registries -}}
{{- fail "config.registries: meshbridge needs at least one registry" -}}
{{- end -}}
{{- $ports := list (int .Values.ports.xds) (int .Values.ports.http) (int .Values.ports.debug) -}}
{{- if int .Values.ports.mcp -}}{{- $ports = append $ports (int .Values.ports.mcp) -}}{{- end -}}
{{- if ne (len $ports) (len (uniq $ports)) -}}
{{- fail (printf "ports: %v must differ" $ports) -}}
{{- end -}}
{{- with dig "state" "dir" "" $cfg -}}
{{- if not (isAbs .) -}}
{{- fail (printf "config.state.dir: %q must be an absolute path (the chart mounts a volume there)" .) -}}
{{- end -}}
{{- end -}}
{{- range $cfg.registries -}}
{{- with dig "nacos" "cacheDir" "" . -}}
{{- if not (isAbs .) -}}
{{- fail (printf "config.registries[].nacos.cacheDir: %q must be an absolute path (the chart mounts an emptyDir there)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.state.persistence.enabled (gt (int .Values.replicaCount) 1) (not (has "ReadWriteMany" .Values.state.persistence.accessModes)) -}}
{{- fail "state.persistence: every replica mounts the one claim; with replicaCount > 1 its accessModes must include ReadWriteMany" -}}
{{- end -}}
{{- end -}}

{{/*
meshbridge.nacosCacheDirs: the distinct nacos.cacheDir of the config's
registries that the /tmp emptyDir does not hold (the SDK's default,
<tmp>/meshbridge-nacos/<name>, is under /tmp), as a YAML list. Each gets
an emptyDir: the root file system is read-only.
*/}}
{{- define "meshbridge.nacosCacheDirs" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- $stateDir := dig "state" "dir" "" $cfg -}}
{{- $dirs := list -}}
{{- range $cfg.registries -}}
{{- with dig "nacos" "cacheDir" "" . -}}
{{- $d := clean . -}}
{{- if not (or (eq $d "/tmp") (hasPrefix "/tmp/" $d) (eq $d (clean (default "/nonexistent" $stateDir))) (has $d $dirs)) -}}
{{- $dirs = append $dirs $d -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $dirs -}}
{{- end -}}
