#!/usr/bin/env bash
# Prints alerts.yml (or the rule file given) with the job names your
# Prometheus gives the edge's and the backend's targets: EDGE_JOB (default
# edge) and BACKEND_JOB (default orgsvc). The defaults print the file as it
# is, which the Compose stack's prometheus.yml scrapes under.
#   EDGE_JOB=edge BACKEND_JOB=orgedge/orgsvc deploy/prometheus/render-alerts.sh >orgedge-alerts.yml
set -euo pipefail
edge=${EDGE_JOB:-edge}
backend=${BACKEND_JOB:-orgsvc}
for job in "$edge" "$backend"; do
	if ! [[ $job =~ ^[A-Za-z0-9_.:/-]+$ ]]; then
		echo "render-alerts.sh: job name '$job': use letters, digits and _ . : / - only" >&2
		exit 2
	fi
done
# Through placeholders, so that names that are each other's defaults swap.
sed -e 's/job="edge"/job="@EDGE_JOB@"/g' -e 's/job="orgsvc"/job="@BACKEND_JOB@"/g' \
	-e "s|@EDGE_JOB@|$edge|g" -e "s|@BACKEND_JOB@|$backend|g" \
	"${1:-$(dirname "${BASH_SOURCE[0]}")/alerts.yml}"
