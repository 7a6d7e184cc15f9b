#!/usr/bin/env bash
# Rewrites prometheusrule.yaml's spec from deploy/prometheus/alerts.yml, so
# that Kubernetes and Compose alert on the same rules. Run after editing
# alerts.yml; deploy/'s tests fail until the two agree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
{
	sed '/^spec:$/q' prometheusrule.yaml
	sed -n '/^groups:/,$p' ../../prometheus/alerts.yml | sed 's/^\(.\)/  \1/'
} >prometheusrule.yaml.new
mv prometheusrule.yaml.new prometheusrule.yaml
