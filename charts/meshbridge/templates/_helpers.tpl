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

{{/* Where the tls.*.secretName Secrets are mounted (cert-manager's keys: tls.crt, tls.key, ca.crt). */}}
{{- define "meshbridge.tlsDir" -}}/var/run/secrets/meshbridge/tls/{{ . }}{{- end -}}

{{/* "true" when MCP has its own port (mcp.enabled and ports.mcp), else "". */}}
{{- define "meshbridge.mcpPort" -}}
{{- if and (dig "mcp" "enabled" false (.Values.config | default dict)) (int .Values.ports.mcp) -}}true{{- end -}}
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
  xds.tls            the files of tls.xds.secretName, when set (clientCAFile
                     with tls.xds.clientCA)
  mcp.tls            the files of tls.mcp.secretName, when set
*/}}
{{- define "meshbridge.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $ns := dig "output" "namespace" "" $cfg | default .Release.Namespace -}}
{{- $set := dict
  "xds" (dict "address" (printf "0.0.0.0:%d" (int .Values.ports.xds)))
  "http" (dict "address" (printf "0.0.0.0:%d" (int .Values.ports.http)) "debugAddress" (printf "127.0.0.1:%d" (int .Values.ports.debug)))
  "output" (dict "namespace" $ns) -}}
{{- with .Values.tls.xds.secretName -}}
{{- $dir := include "meshbridge.tlsDir" "xds" -}}
{{- $tls := dict "certFile" (printf "%s/tls.crt" $dir) "keyFile" (printf "%s/tls.key" $dir) -}}
{{- if $.Values.tls.xds.clientCA -}}{{- $_ := set $tls "clientCAFile" (printf "%s/ca.crt" $dir) -}}{{- end -}}
{{- $_ := set $set.xds "tls" $tls -}}
{{- end -}}
{{- if include "meshbridge.mcpPort" . -}}
{{- $mcp := dict "address" (printf "0.0.0.0:%d" (int .Values.ports.mcp)) -}}
{{- with .Values.tls.mcp.secretName -}}
{{- $dir := include "meshbridge.tlsDir" "mcp" -}}
{{- $_ := set $mcp "tls" (dict "certFile" (printf "%s/tls.crt" $dir) "keyFile" (printf "%s/tls.key" $dir)) -}}
{{- end -}}
{{- $_ := set $set "mcp" $mcp -}}
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

{{/*
"true" when the pod needs its service account token: the Kubernetes output
(and so leader election) or policy.kubernetes with the in-cluster config, no
kubeconfig; else "".
serviceAccount.automountServiceAccountToken, when not null, decides instead.
*/}}
{{- define "meshbridge.automountToken" -}}
{{- $v := .Values.serviceAccount.automountServiceAccountToken -}}
{{- if kindIs "bool" $v -}}
{{- if $v -}}true{{- end -}}
{{- else -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- if and (or (include "meshbridge.kubernetesEnabled" .) (dig "policy" "kubernetes" "enabled" false $cfg)) (not (dig "kubernetes" "kubeconfig" "" $cfg)) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/*
meshbridge.inlineSecrets: the registry keys that hold a secret inline, each
with the key that names a file instead (mounted from a Secret with
secretMounts): a secret in values would land in the ConfigMap.
*/}}
{{- define "meshbridge.inlineSecrets" -}}
consul:
  token: tokenFile
nacos:
  password: passwordFile
  secretKey: secretKeyFile
zookeeper:
  auth.credentials: auth.credentialsFile
{{- end -}}

{{/* meshbridge.validate fails the render on values the pod could not run with. */}}
{{- define "meshbridge.validate" -}}
{{- $cfg := include "meshbridge.config" . | fromYaml -}}
{{- if not $cfg.registries -}}
{{- fail "config.registries: meshbridge needs at least one registry" -}}
{{- end -}}
{{- $secrets := include "meshbridge.inlineSecrets" . | fromYaml -}}
{{- range $i, $reg := $cfg.registries -}}
{{- range $type, $keys := $secrets -}}
{{- range $key, $fileKey := $keys -}}
{{- $v := $reg -}}
{{- range prepend (splitList "." $key) $type -}}
{{- if kindIs "map" $v -}}{{- $v = get $v . -}}{{- else -}}{{- $v = "" -}}{{- end -}}
{{- end -}}
{{- if $v -}}
{{- fail (printf "config.registries[%d].%s.%s: a secret written in values lands in the ConfigMap; put it in a Secret, mount it with secretMounts and name the file with config.registries[%d].%s.%s (chart README, \"Secrets\")" $i $type $key $i $type $fileKey) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tls.xds.secretName (dig "xds" "tls" nil .Values.config) -}}
{{- fail "tls.xds.secretName and config.xds.tls are both set: the chart sets xds.tls from the Secret; set one" -}}
{{- end -}}
{{- if and .Values.tls.mcp.secretName (not (include "meshbridge.mcpPort" .)) -}}
{{- fail "tls.mcp.secretName: MCP has no port of its own (config.mcp.enabled and ports.mcp); on the xDS port it uses tls.xds" -}}
{{- end -}}
{{- if and .Values.tls.mcp.secretName (dig "mcp" "tls" nil .Values.config) -}}
{{- fail "tls.mcp.secretName and config.mcp.tls are both set: the chart sets mcp.tls from the Secret; set one" -}}
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
