#!/usr/bin/env bash
# ctest example_pg_redis_service: runs `pg_redis_service --demo N` against
# a throw-away PostgreSQL cluster and redis-server (bench/clientlib/
# servers.sh), both stopped on exit. Exit 77 (ctest's SKIP_RETURN_CODE),
# with the reason, when the servers cannot be started here.
#
#   pg_redis_service_test.sh <pg_redis_service binary> [clients]
set -u -o pipefail
BIN=$1
CLIENTS=${2:-30}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/clientlib/servers.sh
source "$HERE/../bench/clientlib/servers.sh"
TMP=$(mktemp -d)
chmod 755 "$TMP"  # as root, the cluster runs as user postgres under it
cleanup() {
  servers_stop
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! servers_start "$TMP/servers" pg redis; then
  echo "SKIP: no throw-away PostgreSQL/Redis here: $SERVERS_WHY"
  exit 77
fi
PG_CONNINFO=$PG_CONNINFO REDIS_SOCK=$REDIS_SOCK \
  timeout -k 5 90 "$BIN" --pool 4 --demo "$CLIENTS"
