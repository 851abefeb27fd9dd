#!/usr/bin/env bash
# Stand-in for `demeter-coordinator certs init|issue` (openssl), used by
# tests/ops/ansible-run.sh ONLY while the built demeter-coordinator lacks the `certs`
# command, so the PKI role's logic (once-only issuance, distribution, modes) can run. It
# follows the contract's file layout: init writes DIR/ca.pem DIR/ca.key; issue writes
# DIR/NAME.pem DIR/NAME.key (CN and SAN = NAME, OU = role). The test says when it is used.
set -euo pipefail
[ "${1:-}" = certs ] || { echo "usage: $0 certs init|issue ..." >&2; exit 2; }
cmd=${2:-}
shift 2
dir='' name='' role=''
while [ $# -gt 0 ]; do
    case $1 in
        --dir) dir=$2 ;;
        --name) name=$2 ;;
        --role) role=$2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
umask 077
case $cmd in
    init)
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
            -subj "/CN=demeter-test-ca" -addext basicConstraints=critical,CA:TRUE \
            -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
        ;;
    issue)
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj "/OU=$role/CN=$name" -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
        openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
            -CAcreateserial -days 825 -extfile <(printf 'subjectAltName=DNS:%s\n' "$name") \
            -out "$dir/$name.pem" 2>/dev/null
        rm -f "$dir/$name.csr"
        ;;
    *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
