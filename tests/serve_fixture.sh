# serve_fixture.sh — sourced by the `projmt serve` tests: a tiny checkpoint
# (test_translator --make-checkpoint), starting a server on a free port and
# stopping it, and small request helpers.
#
#   serve_setup NAME BUILD    the tests' common start: skips (77) when
#                             projmt, test_translator or python3 is missing;
#                             sets PROJMT, TMP (removed at exit, with any
#                             server still running killed), MODEL (the tiny
#                             checkpoint) and SERVE_PID=""
#   serve_start NAME ARGS...  starts `projmt serve --model $MODEL --port 0
#                             --threads 1 ARGS...`, logs to $TMP/NAME.err,
#                             sets SERVE_PID and PORT; non-zero on failure
#   serve_stop                SIGTERM, wait; returns the server's exit status
#   req METHOD PATH ARGS...   curl; sets CODE, body in $TMP/body, headers in $TMP/headers
#   jget FILE EXPR            prints a Python expression over the JSON in FILE (as d)

serve_setup() {
  local name=$1
  BUILD=$2
  PROJMT=$BUILD/projmt
  [ -x "$PROJMT" ] && [ -x "$BUILD/test_translator" ] || { echo "SKIPPED: $PROJMT or test_translator not built"; exit 77; }
  command -v python3 > /dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-$name-XXXXXX")
  SERVE_PID=""
  trap '[ -n "$SERVE_PID" ] && kill -KILL "$SERVE_PID" 2> /dev/null; rm -rf "$TMP"' EXIT
  serve_make_model "$BUILD" "$TMP" || { cat "$TMP/make.log"; echo "FAIL: making the checkpoint"; exit 1; }
  MODEL=$TMP/m.ckpt
}

serve_make_model() {   # BUILD DIR -> $DIR/m.ckpt
  "$1/test_translator" --make-checkpoint "$2/m.ckpt" > "$2/make.log" 2>&1
}

serve_start() {
  local name=$1; shift
  "$PROJMT" serve --model "$MODEL" --port 0 --threads 1 "$@" 2> "$TMP/$name.err" &
  SERVE_PID=$!
  PORT=""
  # Wait for the "listening" line: bounded in tries, not a timing assertion.
  for _ in $(seq 600); do
    # Any host: 127.0.0.1, or [::] for an IPv6 server.
    PORT=$(sed -n 's/.*listening on http:\/\/.*:\([0-9]*\)\/ .*/\1/p' "$TMP/$name.err" 2> /dev/null)
    [ -n "$PORT" ] && return 0
    kill -0 "$SERVE_PID" 2> /dev/null || { cat "$TMP/$name.err"; return 1; }
    sleep 0.1
  done
  return 1
}

serve_stop() {
  kill -TERM "$SERVE_PID" 2> /dev/null
  wait "$SERVE_PID"
}

req() {
  local method=$1 path=$2; shift 2
  CODE=$(curl -s --path-as-is -X "$method" -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' "$@" \
    "http://127.0.0.1:$PORT$path")
}

jget() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1], encoding="utf-8")); print(eval(sys.argv[2]))' "$1" "$2"
}
