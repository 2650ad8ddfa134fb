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
The image repository. Upstream's (left in a values file written for upstream's chart) holds the Go
descheduler, which does not take desched's arguments: desched's own image is used instead.
*/}}
{{- define "desched.imageRepository" -}}
{{- if eq .Values.image.repository "registry.k8s.io/descheduler/descheduler" -}}
desched
{{- else -}}
{{- .Values.image.repository -}}
{{- end -}}
{{- end -}}

{{/*
A listener's port: `ports.metrics` / `ports.health`. Upstream's chart has `ports` as a list of
container ports instead; with such values desched's defaults apply.
*/}}
{{- define "desched.port" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if and (kindIs "map" $root.Values.ports) (hasKey $root.Values.ports $name) -}}
{{- index $root.Values.ports $name -}}
{{- else -}}
{{- ternary 10258 10259 (eq $name "metrics") -}}
{{- end -}}
{{- end -}}

{{/*
Namespace of the leader-election Lease.
*/}}
{{- define "desched.leaseNamespace" -}}
{{- /* upstream's chart still honours its misspelt resourceNamescape */ -}}
{{- default (default .Release.Namespace .Values.leaderElection.resourceNamescape) .Values.leaderElection.resourceNamespace -}}
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
{{- end -}}

{{/*
The `desched run` arguments (DESIGN §1.1), one YAML list item per argument.
*/}}
{{- define "desched.args" -}}
- run
- --policy=/policy-dir/policy.yaml
{{- if eq .Values.kind "Deployment" }}
- {{ printf "--interval=%s" (required "deschedulingInterval is required when kind is Deployment" .Values.deschedulingInterval | toString) | quote }}
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
- {{ printf "--metrics-address=:%v" (include "desched.port" (list . "metrics")) | quote }}
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
  automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
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
  containers:
  - name: desched
    image: {{ printf "%s:%s" (include "desched.imageRepository" .) (default .Chart.AppVersion .Values.image.tag | toString) | quote }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    command:
    - desched
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
    - name: metrics
      containerPort: {{ (include "desched.port" (list . "metrics")) }}
      protocol: TCP
    - name: health
      containerPort: {{ (include "desched.port" (list . "health")) }}
      protocol: TCP
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
  volumes:
  - name: policy-volume
    configMap:
      name: {{ include "desched.fullname" . }}
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
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
