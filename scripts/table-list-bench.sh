#!/usr/bin/env bash
# Measures LIST of 5,000 ConfigMaps (700-byte value) from a memory hub: as a Table with
# includeObject=Object (what `kubectl get --sort-by` asks for) and as plain JSON. Prints the median
# of 31 requests each, measured after the TLS handshake (curl time_total minus time_appconnect).
# usage: scripts/table-list-bench.sh PATH/TO/ocm-hub
set -eu
BIN=$1; D=$(mktemp -d)
$BIN serve --listen 127.0.0.1:0 --storage memory --data-dir $D >/dev/null 2>&1 &
PID=$!
for i in $(seq 50); do [ -f $D/endpoints.json ] && break; sleep 0.2; done
URL=$(python3 -c "import json;print(json.load(open('$D/endpoints.json'))['https'])")
C="curl -sk --cert $D/pki/admin.crt --key $D/pki/admin.key"
PAY=$(head -c 700 /dev/zero | tr '\0' a)
seq 5000 | xargs -P 8 -I{} $C -o /dev/null -X POST -H 'content-type: application/json' \
  -d "{\"metadata\":{\"name\":\"cm-{}\"},\"data\":{\"v\":\"$PAY\"}}" $URL/api/v1/namespaces/default/configmaps
med() { awk '{print $2-$1}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
T=$(for i in $(seq 31); do $C -o /dev/null -w '%{time_appconnect} %{time_total}\n' -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "$URL/api/v1/namespaces/default/configmaps?includeObject=Object"; done | med)
J=$(for i in $(seq 31); do $C -o /dev/null -w '%{time_appconnect} %{time_total}\n' "$URL/api/v1/namespaces/default/configmaps"; done | med)
echo "table(includeObject=Object) median ${T}s; json median ${J}s"
kill $PID; wait $PID 2>/dev/null || true; rm -rf $D
