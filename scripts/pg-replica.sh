#!/usr/bin/env bash
# A physical streaming replica of the local PostgreSQL server, for the
# tests of readers on a replica (cmd/marlowe-follower/replica_test.go).
#
#   pg-replica.sh up PORT   makes a standby of 127.0.0.1:5432 with
#                           pg_basebackup -R in a new directory, starts it on
#                           127.0.0.1:PORT and prints the directory
#   pg-replica.sh down DIR  stops that standby and removes DIR
#
# The server runs as the postgres OS user: as root the commands run through
# runuser, otherwise through sudo -u postgres. Replication connections from
# 127.0.0.1 must be allowed: when the server's pg_hba.conf has no
# replication entry for 127.0.0.1/32, one is added (trust, as the suite's
# server trusts local connections) and the configuration reloaded; run again,
# it changes nothing. wal_level replica and max_wal_senders are the
# defaults of PostgreSQL 10 and later.
set -Eeuo pipefail

primary_host=127.0.0.1
primary_port=5432

# PGPASSWORD, when set, is the postgres role's password on the primary
# (for a server that asks for one).
as_postgres() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env TMPDIR=/tmp PGPASSWORD="${PGPASSWORD:-}" "$@"
	else
		sudo -u postgres env TMPDIR=/tmp PGPASSWORD="${PGPASSWORD:-}" "$@"
	fi
}

# The server's binaries: the newest installed PostgreSQL's, else PATH's.
bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -n "$d" ] && [ -x "$d/pg_basebackup" ]; then
		echo "$d"
	else
		dirname "$(command -v pg_basebackup)"
	fi
}

psql_primary() {
	as_postgres psql -h "$primary_host" -p "$primary_port" -U postgres -d postgres -tAX -c "$1"
}

allow_replication() {
	local hba
	hba=$(psql_primary "SHOW hba_file")
	if as_postgres grep -Eq '^[[:space:]]*host[[:space:]]+replication[[:space:]]+(all|postgres)[[:space:]]+127\.0\.0\.1/32' "$hba"; then
		return
	fi
	echo "pg-replica: allowing replication connections from 127.0.0.1 in $hba" >&2
	printf '# added by marlowe-follower scripts/pg-replica.sh (tests of readers on a replica)\nhost replication all 127.0.0.1/32 trust\n' |
		as_postgres tee -a "$hba" >/dev/null
	psql_primary "SELECT pg_reload_conf()" >/dev/null
}

up() {
	local port=$1 bin dir
	bin=$(bindir)
	allow_replication
	dir=$(as_postgres mktemp -d /tmp/marlowe-replica.XXXXXX)
	trap 'failed "$dir"' ERR
	# A standby refuses to start with lower limits than its primary's.
	local limits="" name
	for name in max_connections max_worker_processes max_wal_senders max_prepared_transactions max_locks_per_transaction; do
		limits+="$name = $(psql_primary "SHOW $name")"$'\n'
	done
	as_postgres "$bin/pg_basebackup" -h "$primary_host" -p "$primary_port" -U postgres -D "$dir/data" -R -X stream -c fast
	# Debian keeps the configuration outside the data directory: the
	# standby gets its own, minimal one.
	as_postgres sh -c "cat > '$dir/data/postgresql.conf'" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
hot_standby = on
hot_standby_feedback = on
shared_buffers = 32MB
$limits
EOF
	as_postgres sh -c "printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' > '$dir/data/pg_hba.conf'"
	as_postgres sh -c ": > '$dir/data/pg_ident.conf'"
	as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
	trap - ERR
	echo "$dir"
}

# failed shows why the standby did not start and removes it.
failed() {
	local dir=$1
	echo "pg-replica: the standby did not start; its log:" >&2
	tail -n 20 "$dir/server.log" >&2 2>/dev/null || true
	down "$dir"
	exit 1
}

down() {
	local dir=$1 bin
	bin=$(bindir)
	case "$dir" in
	/tmp/marlowe-replica.*) ;;
	*)
		echo "pg-replica: $dir is not a replica directory this script made" >&2
		exit 2
		;;
	esac
	if [ -d "$dir/data" ]; then
		as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
}

case "${1:-}" in
up) up "${2:?port}" ;;
down) down "${2:?directory}" ;;
*)
	echo "usage: $0 up PORT | down DIR" >&2
	exit 2
	;;
esac
