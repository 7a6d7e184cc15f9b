#!/bin/sh
# tokens.sh N PREFIX > FILE: N access tokens of the development issuer's
# generated enterprise users PREFIX-1 … PREFIX-N (password grant, client
# cli; they live 10 minutes).
n=${1:-100}; prefix=${2:-enterprise-bench}
issuer=${ISSUER:-http://127.0.0.1:8081/realms/dev}
i=1
while [ "$i" -le "$n" ]; do
  curl -sf -d grant_type=password -d client_id=cli -d "username=$prefix-$i" -d password=dev \
    "$issuer/protocol/openid-connect/token" | sed -E 's/.*"access_token":"([^"]+)".*/\1/'
  i=$((i + 1))
done
