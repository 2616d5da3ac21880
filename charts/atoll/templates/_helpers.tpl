{{/* Labels every object of the release carries. */}}
{{- define "atoll.labels" -}}
app.kubernetes.io/name: atoll
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: atoll
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Selector labels of one component (agent or dns). */}}
{{- define "atoll.selector" -}}
app.kubernetes.io/name: atoll
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "atoll.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "atoll.member" -}}
{{- if has .Values.mode (list "member" "both") }}true{{ end -}}
{{- end }}

{{/* The container securityContext of every Atoll container. */}}
{{- define "atoll.containerSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Pod anti-affinity over nodes for one component: .mode is required or preferred. */}}
{{- define "atoll.antiAffinity" -}}
podAntiAffinity:
{{- if eq .mode "required" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "atoll.selector" . | nindent 10 }}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "atoll.selector" . | nindent 12 }}
{{- end }}
{{- end }}
