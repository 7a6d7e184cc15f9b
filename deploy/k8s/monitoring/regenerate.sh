#!/usr/bin/env bash
# Rewrites prometheusrule.yaml's spec from deploy/prometheus/alerts.yml, so
# that Kubernetes and Compose alert on the same rules, with the job names of
# your cluster: EDGE_JOB (default edge: what servicemonitor.yaml gives the
# edge) and BACKEND_JOB (default orgsvc: whatever scrapes your backend gives
# it; a PodMonitor makes it <namespace>/<name>). Run after editing
# alerts.yml or to change the names; deploy/'s tests fail until the two
# agree.
#   BACKEND_JOB=orgedge/orgsvc deploy/k8s/monitoring/regenerate.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
edge=${EDGE_JOB:-edge}
backend=${BACKEND_JOB:-orgsvc}
rules=$(EDGE_JOB=$edge BACKEND_JOB=$backend ../../prometheus/render-alerts.sh)
{
	sed -n '1,/^metadata:$/p' prometheusrule.yaml | sed '$d'
	cat <<YAML
metadata:
  name: edge
  labels:
    app.kubernetes.io/name: edge
  annotations:
    # The job names these rules select (regenerate.sh's EDGE_JOB, BACKEND_JOB).
    orgedge.example/edge-job: "$edge"
    orgedge.example/backend-job: "$backend"
spec:
YAML
	sed -n '/^groups:/,$p' <<<"$rules" | sed 's/^\(.\)/  \1/'
} >prometheusrule.yaml.new
mv prometheusrule.yaml.new prometheusrule.yaml
