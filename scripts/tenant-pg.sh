#!/usr/bin/env bash
# Sourced by scripts/test.sh: starts a PostgreSQL cluster of our own with scram-sha-256 password
# authentication for tenant databases (the machine's cluster trusts every local connection, so it
# cannot prove that a password is checked) and exports TEST_TENANT_PG_URL. The cluster is stopped
# and removed when the calling shell exits. Reuses TEST_TENANT_PG_URL when the caller set it.

start_tenant_pg() {
  if [[ -n ${TEST_TENANT_PG_URL:-} ]]; then return 0; fi
  local bin dir port pw
  bin=$(pg_bin) || true
  if [[ -z $bin ]]; then say "PostgreSQL server binaries not found (apt-get install -y postgresql)"; return 1; fi
  dir=$(mktemp -d /tmp/tenant-pg.XXXXXX)
  chown postgres:postgres "$dir" 2>/dev/null || true
  port=$(free_port $((55432 + RANDOM % 4000)))
  pw=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
  printf '%s\n' "$pw" >"$dir/pw"
  chown postgres:postgres "$dir/pw" 2>/dev/null || true
  local as=()
  if [[ $(id -u) == 0 ]]; then as=(runuser -u postgres --); fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth-host=scram-sha-256 --auth-local=scram-sha-256 \
    --pwfile="$dir/pw" -E UTF8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; return 1; }
  # Another run may take the port between the check and the start (initdb takes seconds): try
  # again on another one.
  local try
  for try in 1 2 3 4 5; do
    if "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
      start >/dev/null; then
      break
    fi
    if [[ $try == 5 ]] || ! grep -q "Address already in use" "$dir/server.log"; then
      cat "$dir/server.log" >&2
      rm -rf "$dir"
      return 1
    fi
    port=$(free_port $((55432 + RANDOM % 4000)))
  done
  TENANT_PG_DIR=$dir
  TENANT_PG_BIN=$bin
  export TEST_TENANT_PG_URL="postgres://postgres:${pw}@127.0.0.1:${port}/postgres?sslmode=disable"
  trap stop_tenant_pg EXIT
  say "tenant PostgreSQL (scram-sha-256) on 127.0.0.1:$port"
}

stop_tenant_pg() {
  if [[ -n ${TENANT_PG_DIR:-} ]]; then
    local as=()
    if [[ $(id -u) == 0 ]]; then as=(runuser -u postgres --); fi
    "${as[@]}" "$TENANT_PG_BIN/pg_ctl" -D "$TENANT_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$TENANT_PG_DIR"
    TENANT_PG_DIR=
  fi
}
