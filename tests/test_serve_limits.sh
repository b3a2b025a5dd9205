#!/usr/bin/env bash
# test_serve_limits.sh — `projmt serve` against clients that try to hold it
# or reach its parser without a key, each case a server of its own:
#   - options out of range are refused, never wrapped, from flags or a
#     --config file, and every setting but the key is a config key (--port 4294975488
#     once became 8192 and the server started);
#   - the API key from --api-key-file or PROJMT_API_KEY (not ps), one
#     source at a time; a request without the key gets 403 before its body
#     is parsed (invalid JSON too), a wrong Bearer key before its body is
#     even sent;
#   - a chunked body is cut as soon as it passes --max-body, while the
#     client is still sending;
#   - a body trickled under the idle timeout is cut at --request-timeout;
#   - one address holds at most --max-connections-per-ip connections;
#   - the drain ends at --drain-timeout though a client still trickles;
#   - a second signal during the drain exits at once.
# No wall-clock assertion: each wait is bounded in tries, and the limits
# under test are a few seconds while the clients would go on for minutes.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
command -v curl > /dev/null || { echo "SKIPPED: curl is not installed (apt-get install curl)"; exit 77; }
source "$(dirname "$0")/serve_fixture.sh"
serve_setup serve-limits "${1:?usage: test_serve_limits.sh BUILD_DIR}"
JSON=(-H 'Content-Type: application/json')
BODY='"q": "the cat sleeps", "source": "en", "target": "es"'

# ---- options: out of range is a usage error, not another value ----
for bad in "--port 4294975488" "--port -1" "--max-body 15" "--timeout 0" "--max-batch 99999999999" \
           "--drain-timeout -1" "--max-connections-per-ip 0" "--request-timeout 0"; do
    # shellcheck disable=SC2086  # the option and its value are two words
    timeout 60 "$PROJMT" serve --model "$MODEL" --threads 1 $bad > /dev/null 2> "$TMP/range.err"
    rc=$?
    check "$bad refused with status 2 (got $rc: $(head -c 200 "$TMP/range.err"))" test "$rc" -eq 2
done
timeout 60 "$PROJMT" serve --model "$MODEL" --threads 1 --port 4294975488 2> "$TMP/port.err"
check "the port message names the range" grep -q "from 0 to 65535" "$TMP/port.err"
"$PROJMT" serve --help > "$TMP/help.txt"
check "--help lists the serve settings of the config table" grep -q -- "--drain-timeout" "$TMP/help.txt"
"$PROJMT" serve --model "$MODEL" --drain-timeout 7 --dump-config > "$TMP/dump.ini"
check "--dump-config holds drain_timeout" grep -qx "drain_timeout = 7" "$TMP/dump.ini"
# Every server setting but the key is a config key: a --config file sets it,
# --dump-config shows it, and its range holds there too.
printf '[serve]\nhost = 0.0.0.0\nmax_batch = 7\nmax_body = 4096\ntimeout = 3\n' > "$TMP/serve.ini"
"$PROJMT" serve --model "$MODEL" --config "$TMP/serve.ini" --max-beam 5 --dump-config > "$TMP/dump2.ini"
for kv in "host = 0.0.0.0" "max_batch = 7" "max_body = 4096" "timeout = 3" "max_beam = 5" "port = 8080"; do
    check "--config / --dump-config: $kv" grep -qx "$kv" "$TMP/dump2.ini"
done
check "the API key is never a config key" test "$(grep -c "^api_key =" "$TMP/dump2.ini")" -eq 0
printf '[serve]\nmax_connections = 0\n' > "$TMP/bad.ini"
timeout 60 "$PROJMT" serve --model "$MODEL" --config "$TMP/bad.ini" > /dev/null 2> "$TMP/bad.err"
rc=$?
check "a config file's value out of range is refused too (status $rc)" test "$rc" -eq 2
check "... naming the range" grep -q "max_connections.*from 1 to 65536" "$TMP/bad.err"

# ---- the API key: from a file or the environment, checked first ----
printf 'from-a-file\n' > "$TMP/key.txt"
timeout 60 "$PROJMT" serve --model "$MODEL" --threads 1 --api-key x --api-key-file "$TMP/key.txt" 2> /dev/null
check "--api-key with --api-key-file is refused" test $? -eq 2
printf '\n' > "$TMP/empty-key.txt"
timeout 60 "$PROJMT" serve --model "$MODEL" --threads 1 --api-key-file "$TMP/empty-key.txt" 2> /dev/null
check "an empty key file is refused" test $? -eq 2
serve_start keyfile --api-key-file "$TMP/key.txt" || { echo "FAIL: the server did not start"; exit 1; }
req POST /translate "${JSON[@]}" -d "{$BODY, \"api_key\": \"from-a-file\"}"
check "key file: its key is accepted ($CODE)" test "$CODE" = 200
req POST /translate "${JSON[@]}" -d "{$BODY}"
check "key file: no key, 403 ($CODE)" test "$CODE" = 403
req POST /translate "${JSON[@]}" -d '{"q": '
check "no key and invalid JSON: 403 before the parser ($CODE)" test "$CODE" = 403
req POST /translate "${JSON[@]}" -d '{"q": 7, "api_key": "nope"}'
check "wrong key and invalid fields: 403 before the fields ($CODE)" test "$CODE" = 403
# A wrong Bearer key is answered from the headers: the body is never sent.
python3 - "$PORT" > "$TMP/bearer.txt" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
          b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
PY
check "wrong Bearer key: 403 before the body ($(cat "$TMP/bearer.txt"))" grep -q "^HTTP/1.1 403" "$TMP/bearer.txt"
serve_stop
PROJMT_API_KEY=from-the-env serve_start keyenv || { echo "FAIL: the server did not start"; exit 1; }
req POST /translate "${JSON[@]}" -H "Authorization: Bearer from-the-env" -d "{$BODY}"
check "PROJMT_API_KEY: its key is accepted ($CODE)" test "$CODE" = 200
req POST /translate "${JSON[@]}" -d "{$BODY}"
check "PROJMT_API_KEY: no key, 403 ($CODE)" test "$CODE" = 403
serve_stop

# ---- slow and greedy clients ----
# client.py MODE PORT: one client; prints what the server did to it.
cat > "$TMP/client.py" <<'PY'
import socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
head = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

def closed(s):
    """True once the server has closed s (EOF or reset), polled for at most 300 s."""
    s.settimeout(1)
    for _ in range(300):
        try:
            if s.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False

def trickle(s, pieces, pause):
    """Sends one byte per pause; True when the server cut the connection first."""
    s.setblocking(True)
    for _ in range(pieces):
        try:
            s.sendall(b"x")
        except OSError:
            return True
        s.settimeout(pause)
        try:
            if s.recv(4096) == b"":
                return True
        except socket.timeout:
            pass
        except OSError:
            return True
    return False

s = socket.create_connection(("127.0.0.1", port), timeout=60)
if mode == "chunked":       # 64 bytes past a 128-byte limit, then the client waits, body unfinished
    s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
    # A server that cuts the body at the limit may close before the last
    # chunks are sent: a send that fails is the cut, seen early (CI on a
    # loaded machine once got BrokenPipeError here).
    cut_while_sending = False
    try:
        for _ in range(12):
            s.sendall(b"10\r\n" + b"x" * 16 + b"\r\n")
    except OSError:
        cut_while_sending = True
    print("chunked cut" if cut_while_sending or closed(s) else "chunked held")
elif mode == "trickle":     # one byte a second into a 10 000-byte body: about three hours
    s.sendall(head + b"Content-Length: 10000\r\n\r\n")
    print("trickle cut" if trickle(s, 10000, 1.0) else "trickle held")
elif mode == "per-ip":      # two idle connections allowed, the third closed at accept
    s.sendall(b"GET /health HTTP/1.1\r\n")
    second = socket.create_connection(("127.0.0.1", port), timeout=60)
    second.sendall(b"GET /health HTTP/1.1\r\n")
    third = socket.create_connection(("127.0.0.1", port), timeout=60)
    print("third closed" if closed(third) else "third open")
    s.close()
    second.close()
PY
metric_of() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

serve_start chunked --max-body 128 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$TMP/client.py" chunked "$PORT" > "$TMP/chunked.txt" 2>&1
check "a chunked body is cut once past --max-body ($(cat "$TMP/chunked.txt"))" grep -qx "chunked cut" "$TMP/chunked.txt"
check "the cut is counted" test "$(metric_of 'projmt_connections_closed_total{reason="body_too_large"}')" = 1
serve_stop

serve_start trickle --timeout 30 --request-timeout 2 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$TMP/client.py" trickle "$PORT" > "$TMP/trickle.txt" 2>&1
check "a trickled body is cut at --request-timeout ($(cat "$TMP/trickle.txt"))" grep -qx "trickle cut" "$TMP/trickle.txt"
check "the timeout is counted" test "$(metric_of 'projmt_connections_closed_total{reason="request_timeout"}')" = 1
serve_stop

serve_start perip --max-connections-per-ip 2 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$TMP/client.py" per-ip "$PORT" > "$TMP/perip.txt" 2>&1
check "a third connection from one address is closed ($(cat "$TMP/perip.txt"))" grep -qx "third closed" "$TMP/perip.txt"
for _ in $(seq 100); do   # the server frees the two slots once it sees them closed
    req GET /health
    [ "$CODE" = 200 ] && break
    sleep 0.1
done
check "served again once the two are closed ($CODE)" test "$CODE" = 200
serve_stop

# ---- the drain has a deadline; a second signal does not wait for it ----
# wait_exit: 0 once the server has exited (bounded tries), its status in RC.
wait_exit() {
    for _ in $(seq 600); do
        kill -0 "$SERVE_PID" 2> /dev/null || { wait "$SERVE_PID"; RC=$?; SERVE_PID=""; return 0; }
        sleep 0.1
    done
    return 1
}
# start_trickler NAME: a trickling client, held by the server once the
# in-flight gauge counts it (the /metrics request counts itself too).
start_trickler() {
    python3 "$TMP/client.py" trickle "$PORT" > "$TMP/$1.txt" 2>&1 &
    TRICKLER=$!
    for _ in $(seq 600); do
        [ "$(metric_of projmt_in_flight_requests)" = 2 ] && return 0
        sleep 0.1
    done
    return 1
}
serve_start drain --timeout 30 --request-timeout 3600 --drain-timeout 2 || { echo "FAIL: the server did not start"; exit 1; }
start_trickler drain-client
check "the trickling request is in flight" test $? -eq 0
kill -TERM "$SERVE_PID"
wait_exit
check "SIGTERM: the server exits though a client still trickles" test $? -eq 0
check "SIGTERM after the drain deadline: exit 0 (got ${RC:-none})" test "${RC:-none}" = 0
check "the drain says its deadline" grep -q "at most 2 s" "$TMP/drain.err"
wait "$TRICKLER"
check "the trickling client was cut ($(cat "$TMP/drain-client.txt"))" grep -qx "trickle cut" "$TMP/drain-client.txt"

serve_start second --timeout 30 --request-timeout 3600 --drain-timeout 3600 || { echo "FAIL: the server did not start"; exit 1; }
start_trickler second-client
check "the trickling request is in flight (second signal)" test $? -eq 0
kill -TERM "$SERVE_PID"
for _ in $(seq 600); do grep -q "answering the requests in flight" "$TMP/second.err" && break; sleep 0.1; done
kill -TERM "$SERVE_PID"
wait_exit
check "a second SIGTERM during the drain exits at once" test $? -eq 0
check "second signal: status 128 + 15 (got ${RC:-none})" test "${RC:-none}" = 143
check "second signal: says so" grep -q "second signal" "$TMP/second.err"
kill "$TRICKLER" 2> /dev/null
wait "$TRICKLER" 2> /dev/null

finish
