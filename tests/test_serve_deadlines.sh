#!/usr/bin/env bash
# test_serve_deadlines.sh — the deadlines of `projmt serve` that must hold
# whatever a client does (issue 43), each case a server of its own:
#   - a client that trickles its *headers* (one byte a second, under the
#     idle timeout) is cut at --request-timeout from the accept: the request
#     deadline once started only after the headers, and the idle timeout
#     restarts at every byte, so such a client held its connection for days;
#   - the same on a keep-alive connection, for the request after an answer;
#   - the time the server spends translating does not count: a request
#     that takes longer than --request-timeout to translate is answered;
#   - a stop under a full queue: past --drain-timeout the sentences still
#     waiting are not translated, their requests get 503 with a message
#     naming the deadline, and the server exits (it once translated every
#     queued sentence first, however long that took).
# No wall-clock assertion: each wait is bounded in tries, and the limits
# under test are a second or two while the clients would go on for a
# minute or more. Times are printed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
command -v curl > /dev/null || { echo "SKIPPED: curl is not installed (apt-get install curl)"; exit 77; }
source "$(dirname "$0")/serve_fixture.sh"
serve_setup serve-deadlines "${1:?usage: test_serve_deadlines.sh BUILD_DIR}"
metric_of() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

# client.py MODE PORT: one client; prints what the server did to it.
cat > "$TMP/client.py" <<'PY'
import json, socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])

def trickle(s, data, pause):
    """Sends data one byte per pause; the seconds until the server cut the
    connection, or None when all of it was sent."""
    start = time.monotonic()
    for i in range(len(data)):
        try:
            s.sendall(data[i:i + 1])
        except OSError:
            return time.monotonic() - start
        s.settimeout(pause)
        try:
            if s.recv(4096) == b"":
                return time.monotonic() - start
        except socket.timeout:
            pass
        except OSError:
            return time.monotonic() - start
    return None

# 60 header bytes at one a second: a minute, far past the 2 s deadline.
slow_headers = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40
s = socket.create_connection(("127.0.0.1", port), timeout=60)
if mode == "headers":
    cut = trickle(s, slow_headers, 1.0)
elif mode == "keep-alive":      # one request answered at once, then the next one's headers trickled
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while not answer.endswith(b"}"):
        piece = s.recv(4096)
        if not piece:
            break
        answer += piece
    if not answer.startswith(b"HTTP/1.1 200"):
        print("first request not answered: %r" % answer[:80])
        sys.exit(1)
    cut = trickle(s, slow_headers, 1.0)
print("%s cut after %.1f s" % (mode, cut) if cut is not None else "%s held" % mode)
PY

# ---- headers trickled: cut at the deadline, from the accept ----
serve_start headers --timeout 30 --request-timeout 2 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$TMP/client.py" headers "$PORT" > "$TMP/headers.txt" 2>&1
cat "$TMP/headers.txt"
check "trickled headers are cut at --request-timeout ($(cat "$TMP/headers.txt"))" grep -q "^headers cut" "$TMP/headers.txt"
check "the cut is counted as a request timeout" \
    test "$(metric_of 'projmt_connections_closed_total{reason="request_timeout"}')" = 1
python3 "$TMP/client.py" keep-alive "$PORT" > "$TMP/keepalive.txt" 2>&1
cat "$TMP/keepalive.txt"
check "on a keep-alive connection, the next request's trickled headers are cut too ($(cat "$TMP/keepalive.txt"))" \
    grep -q "^keep-alive cut" "$TMP/keepalive.txt"
serve_stop
SERVE_PID=""

# ---- the server's own time does not count ----
# 3000 sentences decoded one at a time take far longer than the 1 s deadline.
python3 - "$(dirname "$0")/fixtures/shipped_model_sample.en" "$TMP" <<'PY'
import json, sys
lines = [l.strip() for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
def body(n):
    return json.dumps({"q": "\n".join(lines[i % len(lines)] for i in range(n)), "source": "en", "target": "es",
                       "beam_size": 8})
open(sys.argv[2] + "/slow.json", "w").write(body(3000))
open(sys.argv[2] + "/queue.json", "w").write(body(5000))
PY
serve_start slow --timeout 30 --request-timeout 1 --max-batch 1 --max-sentences 20000 --max-body 1000000 \
    || { echo "FAIL: the server did not start"; exit 1; }
start=$SECONDS
req POST /translate -H 'Content-Type: application/json' --data-binary "@$TMP/slow.json"
echo "a request of 3000 sentences: status $CODE after about $((SECONDS - start)) s (deadline 1 s)"
check "a request translated for longer than --request-timeout is answered ($CODE)" test "$CODE" = 200
check "... with every sentence" test "$(jget "$TMP/body" "d['translatedText'].count('\n') + 1")" = 3000
serve_stop
SERVE_PID=""

# ---- a stop under a full queue ends at the drain deadline ----
# Four clients of 5000 sentences each, decoded one at a time: the queue holds
# far more than a second of work when SIGTERM comes.
serve_start queue --timeout 60 --request-timeout 600 --max-batch 1 --max-sentences 20000 --max-body 1000000 \
    --drain-timeout 1 || { echo "FAIL: the server did not start"; exit 1; }
for k in 1 2 3 4; do
    curl -s -o "$TMP/queue$k.body" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "@$TMP/queue.json" "http://127.0.0.1:$PORT/translate" > "$TMP/queue$k.code" &
    eval "CLIENT$k=\$!"
done
for _ in $(seq 600); do   # until the four are received (the /metrics request counts itself too)
    [ "$(metric_of projmt_in_flight_requests)" = 5 ] && break
    sleep 0.1
done
check "the four requests are in flight" test "$(metric_of projmt_in_flight_requests)" = 5
start=$SECONDS
kill -TERM "$SERVE_PID"
exited=0
for _ in $(seq 1200); do
    kill -0 "$SERVE_PID" 2> /dev/null || { exited=1; break; }
    sleep 0.1
done
echo "SIGTERM under a full queue: the server exited after about $((SECONDS - start)) s (drain deadline 1 s)"
check "SIGTERM under a full queue: the server exits" test "$exited" = 1
[ "$exited" = 1 ] && { wait "$SERVE_PID"; rc=$?; SERVE_PID=""; check "... with status 0 ($rc)" test "$rc" = 0; }
for k in 1 2 3 4; do
    eval "wait \$CLIENT$k"
    code=$(cat "$TMP/queue$k.code")
    check "client $k: its queued request is answered 503 ($code)" test "$code" = 503
    check "client $k: the message names the drain deadline ($(head -c 200 "$TMP/queue$k.body"))" \
        test "$(jget "$TMP/queue$k.body" "'drain deadline of 1 s' in d['error']" 2> /dev/null)" = True
done
translated=$(sed -n 's/.*stopped (\([0-9]*\) sentences translated).*/\1/p' "$TMP/queue.err")
echo "sentences translated before the stop: ${translated:-none} of 20000"
check "the queued sentences were not translated (${translated:-none} of 20000)" test "${translated:-20000}" -lt 20000
finish
