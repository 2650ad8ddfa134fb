{{/*
The chart's name, truncated to a DNS label.
*/}}
{{- define "desched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's full name: the release name when it already contains the chart name.
*/}}
{{- define "desched.fullname" -}}
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

{{/*
The namespace of the release's objects: namespaceOverride (upstream's key, for charts that
combine several releases), else the release namespace.
*/}}
{{- define "desched.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "desched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "desched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "desched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "desched.labels" -}}
{{ include "desched.selectorLabels" . }}
helm.sh/chart: {{ include "desched.chart" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "desched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "desched.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The image: required, since no public desched image exists (scripts/build-image builds it).
Upstream's repository, left in a values file written for upstream's chart, holds the Go
descheduler, which does not take desched's arguments.
*/}}
{{- define "desched.image" -}}
{{- $how := "build the image with scripts/build-image and push it to your registry, then --set image.repository=REGISTRY/desched" -}}
{{- if eq (toString .Values.image.repository) "registry.k8s.io/descheduler/descheduler" -}}
{{- fail (printf "image.repository is upstream descheduler's image, which cannot run desched: %s" $how) -}}
{{- end -}}
{{- $repository := required (printf "image.repository is required: %s" $how) .Values.image.repository -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag | toString) -}}
{{- end -}}

{{/*
The policy file as JSON: policyFile parsed (a ConfigMap holding the policy, which desched also
reads, looked into), else the deschedulerPolicy values. The chart reads it to grant and schedule
what the policy needs.
*/}}
{{- define "desched.policy" -}}
{{- if .Values.policyFile -}}
{{- $doc := fromYaml .Values.policyFile -}}
{{- if hasKey $doc "Error" -}}
{{- fail (printf "policyFile is not one YAML policy document: %s" $doc.Error) -}}
{{- end -}}
{{- if and (eq (toString $doc.kind) "ConfigMap") (kindIs "map" $doc.data) -}}
{{- $data := $doc.data -}}
{{- $key := ternary "policy.yml" "policy.yaml" (hasKey $data "policy.yml") -}}
{{- if eq (len $data) 1 -}}{{- $key = first (keys $data) -}}{{- end -}}
{{- $doc = fromYaml (toString (index $data $key)) -}}
{{- end -}}
{{- toJson $doc -}}
{{- else -}}
{{- toJson (merge (dict "kind" "DeschedulerPolicy") .Values.deschedulerPolicy) -}}
{{- end -}}
{{- end -}}

{{/*
The names in a plugin set's enabled or disabled list (Koordinator's `- name: X` items).
*/}}
{{- define "desched.pluginNames" -}}
{{- $names := list -}}
{{- range . -}}
{{- if kindIs "map" . -}}{{- $names = append $names (toString .name) -}}{{- end -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/*
The Koordinator profiles whose evict plugin is MigrationController, as a JSON list of
{profile, evictionPolicy}. Koordinator's defaults enable it: with no `evict` set, or one that
neither disables it (by name or `*`) nor enables another plugin in its place.
*/}}
{{- define "desched.migrationProfiles" -}}
{{- $policy := fromJson (include "desched.policy" .) -}}
{{- $found := list -}}
{{- if eq (toString $policy.kind) "DeschedulerConfiguration" -}}
{{- range ($policy.profiles | default (list (dict "name" "koord-descheduler"))) -}}
{{- $profile := . -}}
{{- $plugins := (kindIs "map" $profile.plugins) | ternary $profile.plugins dict -}}
{{- $evict := (kindIs "map" $plugins.evict) | ternary $plugins.evict dict -}}
{{- $enabled := fromJsonArray (include "desched.pluginNames" ($evict.enabled | default list)) -}}
{{- $disabled := fromJsonArray (include "desched.pluginNames" ($evict.disabled | default list)) -}}
{{- if or (has "MigrationController" $enabled) (and (not (has "*" $disabled)) (not (has "MigrationController" $disabled))) -}}
{{- $policyName := "Eviction" -}}
{{- range ($profile.pluginConfig | default list) -}}
{{- if and (kindIs "map" .) (eq (toString .name) "MigrationController") (kindIs "map" .args) -}}
{{- $policyName = default "Eviction" .args.evictionPolicy -}}
{{- end -}}
{{- end -}}
{{- $found = append $found (dict "profile" (toString (default "koord-descheduler" $profile.name)) "evictionPolicy" (toString $policyName)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/*
The policy's own deschedulingInterval (Koordinator's DeschedulerConfiguration), or "" when it sets
none or a zero one ("0s", "0h0m": nothing left once zeros, dots and units are removed), which
desched treats as none.
*/}}
{{- define "desched.policyInterval" -}}
{{- $policy := fromJson (include "desched.policy" .) -}}
{{- if eq (toString $policy.kind) "DeschedulerConfiguration" -}}
{{- $interval := toString ($policy.deschedulingInterval | default "") -}}
{{- if regexReplaceAll "[0.nsuµmh]" $interval "" -}}
{{- $interval -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Whether the migration RBAC is rendered: asked for, or the policy needs it.
*/}}
{{- define "desched.migrationRBAC" -}}
{{- if and .Values.rbac.create (or .Values.rbac.migrationController (fromJsonArray (include "desched.migrationProfiles" .))) -}}
true
{{- end -}}
{{- end -}}

{{/*
Whether the policy asks for surge-first restarts: its `moves` block sets surgeFirst: true (both
formats put it at the top level; docs/moves.md).
*/}}
{{- define "desched.policyRestarts" -}}
{{- $policy := fromJson (include "desched.policy" .) -}}
{{- if and (kindIs "map" $policy.moves) (eq (toString $policy.moves.surgeFirst) "true") -}}
true
{{- end -}}
{{- end -}}

{{/*
Whether the deployment-restart RBAC (`deployments patch`) is rendered: asked for, or the policy
restarts Deployments.
*/}}
{{- define "desched.restartRBAC" -}}
{{- if and .Values.rbac.create (or .Values.rbac.deploymentRestart (include "desched.policyRestarts" .)) -}}
true
{{- end -}}
{{- end -}}

{{/*
Whether the policy cordons nodes: a Koordinator profile enables CustomPriority in `balance` with
`mode: DrainNode` and `autoCordon: true` in its pluginConfig (docs/custompriority.md).
*/}}
{{- define "desched.policyCordons" -}}
{{- $policy := fromJson (include "desched.policy" .) -}}
{{- if eq (toString $policy.kind) "DeschedulerConfiguration" -}}
{{- range ($policy.profiles | default list) -}}
{{- $plugins := (kindIs "map" .plugins) | ternary .plugins dict -}}
{{- $balance := (kindIs "map" $plugins.balance) | ternary $plugins.balance dict -}}
{{- if has "CustomPriority" (fromJsonArray (include "desched.pluginNames" ($balance.enabled | default list))) -}}
{{- range (.pluginConfig | default list) -}}
{{- if and (kindIs "map" .) (eq (toString .name) "CustomPriority") (kindIs "map" .args) -}}
{{- if and (eq (toString .args.mode) "DrainNode") (eq (toString .args.autoCordon) "true") -}}
true
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Whether the node-cordon RBAC (`nodes patch`) is rendered: asked for, or the policy cordons.
*/}}
{{- define "desched.cordonRBAC" -}}
{{- if and .Values.rbac.create (or .Values.rbac.nodeCordon (include "desched.policyCordons" .)) -}}
true
{{- end -}}
{{- end -}}

{{/*
A listener's port: `ports.metrics` / `ports.health`. Upstream's chart has `ports` as a list of
container ports instead, rendered as it is: its first item is the metrics (secure) port, an item
named "health" the health port, else desched's 10259 (a port appended to the list).
*/}}
{{- define "desched.port" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $ports := $root.Values.ports -}}
{{- if kindIs "slice" $ports -}}
{{- if not $ports -}}
{{- fail "ports is an empty list: give upstream's list of container ports (the first is the metrics port) or desched's {metrics: 10258, health: 10259}" -}}
{{- end -}}
{{- range $ports -}}
{{- if not (and (kindIs "map" .) .containerPort) -}}
{{- fail (printf "ports: every item of the list needs a containerPort, as a container port does: %s" (toJson .)) -}}
{{- end -}}
{{- end -}}
{{- $found := ternary (first $ports).containerPort 10259 (eq $name "metrics") -}}
{{- range $ports -}}
{{- if and (eq $name "health") (eq (toString .name) "health") -}}{{- $found = .containerPort -}}{{- end -}}
{{- end -}}
{{- $found -}}
{{- else if and (kindIs "map" $ports) (hasKey $ports $name) -}}
{{- index $ports $name -}}
{{- else -}}
{{- ternary 10258 10259 (eq $name "metrics") -}}
{{- end -}}
{{- end -}}

{{/*
The container's ports: upstream's list as it is (plus desched's health port unless the list names
one), else desched's two named ports.
*/}}
{{- define "desched.containerPorts" -}}
{{- if kindIs "slice" .Values.ports -}}
{{- $named := list -}}
{{- range .Values.ports -}}{{- $named = append $named (toString .name) -}}{{- end -}}
{{- toYaml .Values.ports }}
{{- if not (has "health" $named) }}
- name: health
  containerPort: {{ include "desched.port" (list . "health") }}
  protocol: TCP
{{- end }}
{{- else -}}
- name: metrics
  containerPort: {{ include "desched.port" (list . "metrics") }}
  protocol: TCP
- name: health
  containerPort: {{ include "desched.port" (list . "health") }}
  protocol: TCP
{{- end -}}
{{- end -}}

{{/*
The container's command: `command` as it is, except upstream's "/bin/descheduler" (the Go binary
of upstream's image, which desched's image does not have), which becomes desched.
*/}}
{{- define "desched.command" -}}
{{- $command := .Values.command | default (list "desched") -}}
{{- if eq (toJson $command) (toJson (list "/bin/descheduler")) -}}
{{- $command = list "desched" -}}
{{- end -}}
{{- toYaml $command -}}
{{- end -}}

{{/*
Namespace of the leader-election Lease.
*/}}
{{- define "desched.leaseNamespace" -}}
{{- /* upstream's chart still honours its misspelt resourceNamescape */ -}}
{{- default (default (include "desched.namespace" .) .Values.leaderElection.resourceNamescape) .Values.leaderElection.resourceNamespace -}}
{{- end -}}

{{/*
Settings that cannot work together fail the render with a message.
*/}}
{{- define "desched.validate" -}}
{{- if not (has .Values.kind (list "CronJob" "Deployment" "Job")) -}}
{{- fail (printf "kind must be CronJob, Deployment or Job, not %q" (toString .Values.kind)) -}}
{{- end -}}
{{- if and .Values.leaderElection.enabled (ne .Values.kind "Deployment") -}}
{{- fail "leaderElection.enabled requires kind: Deployment (a CronJob or Job runs one cycle and exits)" -}}
{{- end -}}
{{- if and (eq .Values.kind "Deployment") (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 requires leaderElection.enabled, or every replica would deschedule" -}}
{{- end -}}
{{- if not (kindIs "slice" (.Values.command | default list)) -}}
{{- fail (printf "command must be a list, as a container's command is, not %s" (toJson .Values.command)) -}}
{{- end -}}
{{- $interval := include "desched.policyInterval" . -}}
{{- if and $interval (eq .Values.kind "CronJob") -}}
{{- fail (printf "the policy sets deschedulingInterval: %s, which kind CronJob would replace with the schedule %q: set kind=Deployment to run every %s, or remove deschedulingInterval from the policy to run on the schedule" $interval (toString .Values.schedule) $interval) -}}
{{- end -}}
{{- if and $interval .Values.deschedulingInterval (ne $interval (toString .Values.deschedulingInterval)) -}}
{{- fail (printf "deschedulingInterval is %s but the policy sets deschedulingInterval: %s: leave the value empty to use the policy's, or change the policy" (toString .Values.deschedulingInterval) $interval) -}}
{{- end -}}
{{- if .Values.rbac.create -}}
{{- range fromJsonArray (include "desched.migrationProfiles" .) -}}
{{- if and (has .evictionPolicy (list "Delete" "SoftEviction")) (not $.Values.rbac.podDelete) -}}
{{- fail (printf "the policy's profile %q has MigrationController evictionPolicy: %s, which needs pods delete and patch (a delete bypasses PodDisruptionBudgets): set rbac.podDelete=true" .profile .evictionPolicy) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The `desched run` arguments, one YAML list item per argument.
*/}}
{{- define "desched.args" -}}
- run
- --policy=/policy-dir/policy.yaml
{{- if eq .Values.kind "Deployment" }}
{{- /* A policy's own interval is left to desched (no --interval): the policy stays the one place
that sets it, and desched follows a change to it when it reloads the policy. */}}
{{- if not (include "desched.policyInterval" .) }}
- {{ printf "--interval=%s" (default "5m" .Values.deschedulingInterval | toString) | quote }}
{{- end }}
{{- else }}
- --once
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
{{- with .Values.leaderElection.leaseDuration }}
- {{ printf "--leader-elect-lease-duration=%s" (toString .) | quote }}
{{- end }}
{{- with .Values.leaderElection.renewDeadline }}
- {{ printf "--leader-elect-renew-deadline=%s" (toString .) | quote }}
{{- end }}
{{- with .Values.leaderElection.retryPeriod }}
- {{ printf "--leader-elect-retry-period=%s" (toString .) | quote }}
{{- end }}
- {{ printf "--leader-elect-resource-name=%s" (default "desched" .Values.leaderElection.resourceName) | quote }}
- {{ printf "--leader-elect-resource-namespace=%s" (include "desched.leaseNamespace" .) | quote }}
{{- end }}
{{- if .Values.secureServing.enabled }}
- {{ printf "--secure-port=%v" (include "desched.port" (list . "metrics")) | quote }}
{{- if .Values.secureServing.delegateAuth }}
- --delegate-auth
{{- with .Values.secureServing.alwaysAllowPaths }}
- {{ printf "--authorization-always-allow-paths=%s" (join "," .) | quote }}
{{- end }}
{{- end }}
{{- if .Values.secureServing.tlsSecretName }}
- --tls-cert-file=/tls/tls.crt
- --tls-private-key-file=/tls/tls.key
{{- end }}
{{- else }}
- {{ printf "--metrics-address=:%v" (include "desched.port" (list . "metrics")) | quote }}
{{- end }}
- {{ printf "--health-address=:%v" (include "desched.port" (list . "health")) | quote }}
{{- range $key, $value := .Values.cmdOptions }}
{{- if kindIs "bool" $value }}
{{- if $value }}
- {{ printf "--%s" $key | quote }}
{{- end }}
{{- else if kindIs "invalid" $value }}
- {{ printf "--%s" $key | quote }}
{{- else }}
- {{ printf "--%s=%v" $key $value | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The pod template shared by the CronJob, the Deployment and the Job.
*/}}
{{- define "desched.podTemplate" -}}
metadata:
  {{- if eq .Values.kind "CronJob" }}
  name: {{ include "desched.fullname" . }}
  {{- end }}
  labels:
    {{- include "desched.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "desched.serviceAccountName" . }}
  {{- /* unset: the ServiceAccount's setting applies, as upstream's chart leaves it */}}
  {{- if kindIs "bool" .Values.automountServiceAccountToken }}
  automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
  {{- end }}
  {{- if ne .Values.kind "Deployment" }}
  restartPolicy: Never
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.initContainers }}
  initContainers:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
  - name: desched
    image: {{ include "desched.image" . | quote }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    command:
      {{- include "desched.command" . | nindent 6 }}
    args:
      {{- include "desched.args" . | nindent 6 }}
    env:
    # Default namespace of the leader-election Lease.
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    ports:
      {{- include "desched.containerPorts" . | nindent 6 }}
    {{- with .Values.livenessProbe }}
    livenessProbe:
      {{- /* desched serves /healthz over HTTP on the health port only: upstream's values
      (HTTPS on 10258) are pointed there, the rest of the probe is kept */}}
      {{- $probe := deepCopy . }}
      {{- if $probe.httpGet }}
      {{- $_ := set $probe "httpGet" (merge (dict "port" "health" "scheme" "HTTP") (omit $probe.httpGet "port" "scheme")) }}
      {{- end }}
      {{- toYaml $probe | nindent 6 }}
    {{- end }}
    {{- if eq .Values.kind "Deployment" }}
    {{- with .Values.readinessProbe }}
    readinessProbe:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- end }}
    {{- with .Values.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.securityContext }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumeMounts:
    - name: policy-volume
      mountPath: /policy-dir
      readOnly: true
    - name: tmp
      mountPath: /tmp
    {{- if and .Values.secureServing.enabled .Values.secureServing.tlsSecretName }}
    - name: tls
      mountPath: /tls
      readOnly: true
    {{- end }}
    {{- /* upstream's: a token mounted by hand when the automatic one is not wanted */}}
    {{- if and .Values.extraServiceAccountVolumeMounts (not .Values.automountServiceAccountToken) }}
    {{- toYaml .Values.extraServiceAccountVolumeMounts | nindent 4 }}
    {{- end }}
  volumes:
  - name: policy-volume
    configMap:
      name: {{ include "desched.fullname" . }}
  {{- if and .Values.secureServing.enabled .Values.secureServing.tlsSecretName }}
  - name: tls
    secret:
      secretName: {{ .Values.secureServing.tlsSecretName }}
  {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
  {{- if and .Values.extraServiceAccountVolumes (not .Values.automountServiceAccountToken) }}
  {{- toYaml .Values.extraServiceAccountVolumes | nindent 2 }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.dnsConfig }}
  dnsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
