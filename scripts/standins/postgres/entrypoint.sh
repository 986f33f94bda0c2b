#!/bin/sh
# What the official postgres image's entrypoint does, for this stand-in: as
# root, own $PGDATA and drop to postgres; on an empty $PGDATA, initdb with
# POSTGRES_USER / POSTGRES_PASSWORD (scram-sha-256 over TCP) and create
# POSTGRES_DB; then run the server listening on every address.
set -eu
if [ "${1:-}" = postgres ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  pw=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >"$pw"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 -E UTF8 >/dev/null
  rm -f "$pw"
  echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
    createdb -U "$user" "$db"
    pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
  fi
  echo "postgres stand-in: initialised $PGDATA (user $user, database $db)"
fi
exec "$@"
