#!/usr/bin/env bash
# The CLI host on PostgreSQL through --config (the store keys every host hands to runtime_config_from_json): one
# process leaves a turn waiting for approval, a second process resumes it, a third reads the history; the tool ran
# once and nothing went to a SQLite file.
# usage: test_postgres_cli.sh AGENTRT_BINARY   (AGENTRT_TEST_PG_URL: the cluster of ctest's postgres fixture)
set -euo pipefail
cli=$1
if [ -z "${AGENTRT_TEST_PG_URL:-}" ]; then
  echo "FAIL: AGENTRT_TEST_PG_URL is not set: run this through ctest (the postgres fixture starts a server)" >&2
  exit 1
fi
db="agentrt_cli_$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/agentrt-pg-cli-XXXXXX")
cleanup() {
  psql -q "$AGENTRT_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql -q "$AGENTRT_TEST_PG_URL" -c "CREATE DATABASE $db" >/dev/null
url=$(printf '%s' "$AGENTRT_TEST_PG_URL" | sed "s|/postgres?|/$db?|")
cat >"$work/config.json" <<JSON
{"store": {"type": "postgres", "url": "$url", "pool_size": 2}, "model": {"type": "demo"}}
JSON
run() { "$cli" "$1" --data "$work/data" --config "$work/config.json" "${@:2}"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

set +e
run run --thread r1 --message "book a room" >"$work/run.out" 2>"$work/run.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "run: exit $rc, expected 2 (waiting for approval): $(cat "$work/run.err")"
run resume --thread r1 --yes >"$work/resume.out" 2>"$work/resume.err" ||
  fail "resume in a second process: $(cat "$work/resume.err")"
grep -q "Your booking is confirmed" "$work/resume.out" || fail "resume did not answer: $(cat "$work/resume.out")"
run history r1 --json >"$work/history.json" || fail "history"
roles=$(python3 -c 'import json,sys; print(" ".join(m["role"] for m in json.load(open(sys.argv[1]))))' \
  "$work/history.json")
[ "$roles" = "user assistant tool assistant" ] || fail "history roles: $roles"
finished=$(psql -tA "$url" -c "SELECT count(*) FROM ledger WHERE status='finished'")
[ "$finished" = "1" ] || fail "ledger: $finished finished calls, expected 1"
[ ! -e "$work/data/agentrt.db" ] || fail "a SQLite database was created in the data folder"
echo "cli on postgres: run (waiting) -> resume in another process -> history: OK"
