#!/usr/bin/env bash
# test_serve_address_limit.sh — --max-connections-per-ip counts an IPv6
# client by its /64 (issue 43): one host is usually given a whole /64, and
# the limit once counted each IPv6 address, so a client cycling through
# its /64 passed it. IPv4 clients count by address, also when they reach a
# dual-stack server as IPv4-mapped IPv6 (all of which share their first 64
# bits). End to end, with real source addresses: the test runs in a network
# namespace of its own (unshare -n, root) where the loopback interface
# carries addresses of two /64s; the server listens on "::" (IPv6 and
# IPv4). SKIPPED where no namespace can be made.
#
# With a limit of 2: two connections from 2001:db8:1::2 and ::3 are held;
# a third from 2001:db8:1::4 (the same /64) is closed at accept, while one
# from 2001:db8:2::2 (another /64) is answered. Two from 127.0.0.1 are held;
# a third from 127.0.0.1 is closed, one from 127.0.0.2 answered.
set -u
if [ -z "${PROJMT_TEST_NETNS:-}" ]; then
    command -v unshare > /dev/null && command -v ip > /dev/null ||
        { echo "SKIPPED: unshare or ip is not installed"; exit 77; }
    unshare -n true 2> /dev/null || { echo "SKIPPED: no network namespace can be made here (needs root)"; exit 77; }
    PROJMT_TEST_NETNS=1 exec unshare -n bash "$0" "$@"
fi
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
command -v curl > /dev/null || { echo "SKIPPED: curl is not installed (apt-get install curl)"; exit 77; }
source "$(dirname "$0")/serve_fixture.sh"
serve_setup serve-address-limit "${1:?usage: test_serve_address_limit.sh BUILD_DIR}"
ip link set lo up || { echo "FAIL: cannot bring up the namespace's loopback"; exit 1; }
for a in 2001:db8:1::2 2001:db8:1::3 2001:db8:1::4 2001:db8:2::2; do
    ip -6 addr add "$a/128" dev lo nodad || { echo "FAIL: cannot add $a to the namespace's loopback"; exit 1; }
done

serve_start limit --host :: --max-connections-per-ip 2 --timeout 60 --request-timeout 600 \
    || { echo "FAIL: the server did not start"; exit 1; }
python3 - "$PORT" > "$TMP/clients.txt" 2>&1 <<'PY'
import socket, sys
port = int(sys.argv[1])

def connect(source):
    family = socket.AF_INET6 if ":" in source else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(60)
    s.bind((source, 0))
    s.connect(("::1" if family == socket.AF_INET6 else "127.0.0.1", port))
    return s

def hold(source):
    """A connection whose headers never end: it counts against the limit."""
    s = connect(source)
    s.sendall(b"GET /health HTTP/1.1\r\n")
    return s

def answered(source):
    """What a complete request from source got: "answered" or "closed"."""
    try:
        s = connect(source)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            piece = s.recv(4096)
            if not piece:
                break
            data += piece
        return "answered" if data.startswith(b"HTTP/1.1 200") else "closed"
    except OSError:
        return "closed"

for group, same, other in ((["2001:db8:1::2", "2001:db8:1::3"], "2001:db8:1::4", "2001:db8:2::2"),
                           (["127.0.0.1", "127.0.0.1"], "127.0.0.1", "127.0.0.2")):
    held = [hold(a) for a in group]
    print(f"{same} with {' and '.join(group)} held: {answered(same)}")
    print(f"{other} meanwhile: {answered(other)}")
    for s in held:
        s.close()
PY
cat "$TMP/clients.txt"
check "a third connection from the same IPv6 /64 is closed" grep -qx "2001:db8:1::4 with .* held: closed" "$TMP/clients.txt"
check "another /64 is served meanwhile" grep -qx "2001:db8:2::2 meanwhile: answered" "$TMP/clients.txt"
check "a third connection from one IPv4 address (IPv4-mapped) is closed" \
    grep -qx "127.0.0.1 with .* held: closed" "$TMP/clients.txt"
check "another IPv4 address is served meanwhile (mapped addresses are not one /64)" \
    grep -qx "127.0.0.2 meanwhile: answered" "$TMP/clients.txt"
serve_stop
SERVE_PID=""
finish
