{{- define "streamgate.name" -}}{{ .Release.Name }}-streamgate{{- end -}}
{{- define "streamgate.labels" -}}
app.kubernetes.io/name: streamgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
