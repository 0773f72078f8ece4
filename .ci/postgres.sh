#!/usr/bin/env bash
# Throwaway Postgres cluster for tests: Debian's postgresql package, a cluster
# initialised in a temporary directory, listening on 127.0.0.1 at a free port
# and on a Unix socket in that directory.
#
#   .ci/postgres.sh start DIR   installs the package if absent, starts the
#                               cluster in DIR and prints the connection URL
#                               for WASMHOOKS_TEST_POSTGRES on its last line
#   .ci/postgres.sh stop DIR    stops it and removes DIR
#
# Postgres refuses to run as root: as root the cluster belongs to the
# "postgres" user the package creates, and its commands run through runuser.
set -euo pipefail

cmd=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  if [ -z "$d" ]; then
    echo "installing postgresql" >&2
    local sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
    $sudo apt-get update -qq >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  fi
  echo "$d"
}

case "$cmd" in
start)
  bin=$(bindir)
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)
  as_owner "$bin/initdb" -D "$dir/data" -U wasmhooks --auth=trust -E UTF8 >/dev/null
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >&2
  as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U wasmhooks wasmhooks_test
  echo "postgres://wasmhooks@127.0.0.1:$port/wasmhooks_test?sslmode=disable"
  ;;
stop)
  [ -d "$dir/data" ] || exit 0
  bin=$(bindir)
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
  ;;
*)
  echo "usage: postgres.sh start|stop DIR" >&2; exit 2 ;;
esac
