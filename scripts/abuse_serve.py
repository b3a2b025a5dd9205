#!/usr/bin/env python3
"""abuse_serve.py — a benchmark, not a test (not in CI): `projmt serve` under
a mix of well-behaved and hostile clients for a fixed time, then a stop
under that load.

Clients (threads; each hostile kind from a loopback address of its own,
127.0.0.x, so the per-address connection limit meets only the client that
earns it):
  valid      4 keep-alive clients from 127.0.0.2, one sentence per request,
             the key in the header or the api_key field; every answer is
             compared with `projmt translate` of the same sentence
  invalid    bad JSON, with the key: expects 400
  oversized  a Content-Length over --max-body (expects 413) and a chunked
             body past it (expects the connection cut)
  trickle    a body sent one byte every 2 s (under the idle timeout): expects
             the connection cut at --request-timeout
  header trickle  the headers sent one byte every 2 s: expects the
             connection cut at --request-timeout from the accept
  greedy     opens 40 connections at once from 127.0.0.6: counts how many the
             per-address limit closed at accept, then closes them
  IPv6 /64 flood  40 connections at once, each from another address of one
             IPv6 /64: expects at most --max-connections-per-ip kept (the
             /64 is one client), while a client of another /64 is answered
  huge attention  "attention": true on 40 long sentences (expects 200 under
             5 MB with a block per sentence, or 413) and on a 64 KB body of
             128 long sentences (the same; 413 on the shipped model), every 5 s
  keyless    valid requests without a key, and a wrong Bearer key: expects 403
At the end: SIGTERM while the valid clients and a trickler still run and
16 clients have just sent 96 lines each at beam 8 (a full queue): the time to
exit is compared with --drain-timeout, and each queued request must be
answered, 200 or 503.

As root the run happens in a network namespace of its own (unshare -n),
whose loopback carries the IPv6 /64 flood's addresses and where the server
listens on "::" (IPv6 and IPv4); otherwise on 127.0.0.1, without the IPv6
client.

Reports answers by status (and "cut": connections the server closed as
intended), lost answers (a request that should have been answered and was
not), answers that differ from `projmt translate`, p50/p99 latency of the
valid requests, the server's RSS after warm-up and at the end and its peak
(VmHWM), and the stop.
Prints a Markdown table and writes the figures as JSON (--json).

usage: abuse_serve.py --projmt build/projmt --model models/en-es.int8.pmt
                      --sentences FILE [--minutes 10] [--json out.json]"""
import argparse
import collections
import http.client
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEY = "abuse-run-key"
MAX_BODY = 65536   # the server's default: room for the huge-attention requests
REQUEST_TIMEOUT = 20
DRAIN_TIMEOUT = 10
IDLE_TIMEOUT = 5
PER_IP = 16
IPV6_FLOOD = ["2001:db8:43::%x" % k for k in range(1, 41)]   # one /64
IPV6_OTHER = "2001:db8:44::1"                                 # another
# The full queue at the stop: 16 requests of 96 lines (up to two sentences a
# line: within 128 sentences a request) at beam 8, from two addresses (8 each,
# under the per-address limit): far more than the drain deadline's worth.
QUEUE_CLIENTS, QUEUE_LINES, QUEUE_BEAM = 16, 96, 8


class Tally:
    """Thread-safe counters: answers by (client kind, status), lost answers,
    mismatches, valid latencies."""

    def __init__(self):
        self.lock = threading.Lock()
        self.status = collections.Counter()
        self.lost = collections.Counter()
        self.unexpected = collections.Counter()
        self.mismatches = []
        self.latency = []

    def answer(self, kind, status, expected):
        with self.lock:
            self.status[(kind, status)] += 1
            if status not in expected:
                self.unexpected[(kind, status)] += 1

    def lose(self, kind, why):
        with self.lock:
            self.lost[(kind, why)] += 1


def connect(port, source, timeout=60):
    """A connection from source (IPv4, or IPv6 to ::1)."""
    family = socket.AF_INET6 if ":" in source else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("::1" if family == socket.AF_INET6 else "127.0.0.1", port))
    return s


def http_request(port, source, method, path, body=b"", headers=None, timeout=120):
    """One request on a new connection: (status, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request(method, path, body, headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def valid_client(port, sentences, expected, stop, stopping, tally, seed):
    """Until stop; once stopping (SIGTERM sent), 503 and a refused connection
    are the server's right answers, but a request sent must still be answered."""
    rng = random.Random(seed)
    conn = None
    while not stop.is_set():
        kind = "valid during the stop" if stopping.is_set() else "valid"
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=("127.0.0.2", 0))
        i = rng.randrange(len(sentences))
        body = {"q": sentences[i], "source": "en", "target": "es"}
        headers = {"Content-Type": "application/json"}
        if rng.random() < 0.5:
            headers["Authorization"] = "Bearer " + KEY
        else:
            body["api_key"] = KEY
        start = time.monotonic()
        try:
            conn.request("POST", "/translate", json.dumps(body), headers)
        except OSError as e:
            # Not sent: during the stop the server closes idle keep-alive
            # connections, and a request it never received is not lost.
            sent_status = "not sent (connection closed by the stop)"
            if stopping.is_set() and not isinstance(e, ConnectionRefusedError):
                tally.answer(kind, sent_status, {sent_status})
            elif stopping.is_set():
                tally.answer(kind, "refused (listener closed)", {"refused (listener closed)"})
                stop.wait(0.5)
            else:
                tally.lose(kind, type(e).__name__ + " sending")
            conn.close()
            conn = None
            continue
        try:
            response = conn.getresponse()
            data = response.read()
        except ConnectionRefusedError:
            tally.answer(kind, "refused (listener closed)", {"refused (listener closed)"} if stopping.is_set() else set())
            conn.close()
            conn = None
            stop.wait(0.5)
            continue
        except (OSError, http.client.HTTPException) as e:
            tally.lose(kind, type(e).__name__)
            conn.close()
            conn = None
            continue
        seconds = time.monotonic() - start
        tally.answer(kind, response.status, {200, 503} if stopping.is_set() else {200})
        if response.status == 200:
            text = json.loads(data)["translatedText"]
            with tally.lock:
                tally.latency.append(seconds)
                if text != expected[i]:
                    tally.mismatches.append((sentences[i], text, expected[i]))
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
            conn = None
    if conn:
        conn.close()


def answered(kind, tally, expected, fn):
    """Runs one request that must be answered; a broken connection is lost."""
    try:
        status, _ = fn()
        tally.answer(kind, status, expected)
    except (OSError, http.client.HTTPException) as e:
        tally.lose(kind, type(e).__name__)


def invalid_client(port, stop, tally, seed):
    rng = random.Random(seed)
    bodies = [b'{"q": ', b"not json", b'{"q": "a", "source": "en", "target": "es"', b"[1, 2",
              b'{"q": "\\x", "source": "en", "target": "es"}', b'{"q": 7, "source": "en", "target": "es"}']
    while not stop.is_set():
        body = rng.choice(bodies)
        answered("invalid", tally, {400}, lambda: http_request(
            port, "127.0.0.3", "POST", "/translate", body,
            {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}))
        stop.wait(0.2)


def cut(s):
    """True when the server closes s (EOF or reset) within 120 s."""
    s.settimeout(120)
    try:
        while True:
            if s.recv(65536) == b"":
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def oversized_client(port, stop, tally):
    big = b'{"q": "' + b"x" * (2 * MAX_BODY) + b'", "source": "en", "target": "es"}'
    while not stop.is_set():
        answered("oversized", tally, {413}, lambda: http_request(
            port, "127.0.0.4", "POST", "/translate", big,
            {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}))
        try:
            s = connect(port, "127.0.0.4")
            s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Authorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                for _ in range(MAX_BODY // 512 + 2):
                    s.sendall(b"200\r\n" + b"x" * 512 + b"\r\n")
            except OSError:
                pass
            tally.answer("oversized-chunked", "cut" if cut(s) else "held", {"cut"})
            s.close()
        except OSError as e:
            tally.lose("oversized-chunked", type(e).__name__)
        stop.wait(0.5)


def trickle_once(port, stop, tally, kind):
    try:
        s = connect(port, "127.0.0.5")
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (MAX_BODY // 2))
    except OSError as e:
        tally.lose(kind, type(e).__name__)
        return
    start = time.monotonic()
    s.settimeout(2)
    while True:
        try:
            s.sendall(b"x")
            if s.recv(4096) == b"":
                break
        except socket.timeout:
            if stop.is_set() and kind == "trickle":
                s.close()
                return
            continue
        except OSError:
            break
    tally.answer(kind, "cut", {"cut"})
    with tally.lock:
        tally.status[(kind + " seconds", "max")] = max(tally.status[(kind + " seconds", "max")],
                                                       round(time.monotonic() - start))
    s.close()


def trickle_client(port, stop, tally):
    while not stop.is_set():
        trickle_once(port, stop, tally, "trickle")


def greedy_client(port, stop, tally):
    while not stop.is_set():
        held, closed = [], 0
        for _ in range(40):
            try:
                s = connect(port, "127.0.0.6", timeout=5)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")   # headers never finished
                held.append(s)
            except OSError:
                closed += 1
        time.sleep(1)
        for s in held:   # a connection closed at accept reads EOF at once
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        tally.answer("greedy (40 connections)", "closed by the per-address limit", {"closed by the per-address limit"})
        with tally.lock:
            tally.status[("greedy connections", "kept")] += 40 - closed
            tally.status[("greedy connections", "closed")] += closed
        for s in held:
            s.close()
        stop.wait(2)


def header_trickle_client(port, stop, tally):
    """Headers one byte every 2 s: cut at the request deadline, from the accept."""
    headers = (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: " +
               b"a" * 4000 + b"\r\n\r\n")
    while not stop.is_set():
        try:
            s = connect(port, "127.0.0.9")
        except OSError as e:
            tally.lose("header trickle", type(e).__name__)
            stop.wait(1)
            continue
        start = time.monotonic()
        s.settimeout(2)
        was_cut = False
        for i in range(len(headers)):
            try:
                s.sendall(headers[i:i + 1])
                if s.recv(4096) == b"":
                    was_cut = True
                    break
            except socket.timeout:
                if stop.is_set():
                    break
                continue
            except OSError:
                was_cut = True
                break
        s.close()
        if not was_cut:
            if not stop.is_set():
                tally.answer("header trickle", "held", {"cut"})
            continue
        tally.answer("header trickle", "cut", {"cut"})
        with tally.lock:
            tally.status[("header trickle seconds", "max")] = max(tally.status[("header trickle seconds", "max")],
                                                                  round(time.monotonic() - start))


def ipv6_flood_client(port, stop, tally):
    """40 connections from 40 addresses of one /64, headers never finished:
    at most PER_IP kept; meanwhile a request from another /64 is answered."""
    while not stop.is_set():
        held, closed = [], 0
        for source in IPV6_FLOOD:
            try:
                s = connect(port, source, timeout=5)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
                held.append(s)
            except OSError:
                closed += 1
        time.sleep(1)
        for s in held:   # a connection closed at accept reads EOF at once
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        kept = len(IPV6_FLOOD) - closed
        tally.answer("IPv6 /64 flood (40 addresses)", f"{min(kept, PER_IP)} kept or fewer" if kept <= PER_IP
                     else f"{kept} kept", {f"{min(kept, PER_IP)} kept or fewer"})
        with tally.lock:
            tally.status[("IPv6 /64 flood connections", "kept")] += kept
            tally.status[("IPv6 /64 flood connections", "closed")] += closed
        answered("IPv6 another /64 during the flood", tally, {200},
                 lambda: http_request_v6(port, IPV6_OTHER, "GET", "/health"))
        for s in held:
            s.close()
        stop.wait(2)


def http_request_v6(port, source, method, path, timeout=120):
    """One request to [::1]:port from an IPv6 source: (status, body bytes)."""
    conn = http.client.HTTPConnection("::1", port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def attention_bodies(sentences_file):
    """Two requests with attention: 40 long sentences in one q, and a body
    just under 64 KB of 128 long sentences (one a line)."""
    with open(sentences_file, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    longs = [l for l in lines if 150 <= len(l) <= 200 and ". " not in l][:40]
    forty = json.dumps({"q": "\n".join(longs), "source": "en", "target": "es", "attention": True, "api_key": KEY})
    clean = [re.sub(r"[.?!;:]", "", l) for l in lines]
    big, i = [], 0
    while len(big) < 128:
        s = ""
        while len(s) < 480:
            s += (" and " if s else "") + clean[i % len(clean)]
            i += 1
        big.append(s[:560] + ".")
    q = "\n".join(big)
    while True:
        body = json.dumps({"q": q, "source": "en", "target": "es", "attention": True, "api_key": KEY})
        if len(body.encode()) <= MAX_BODY:
            break
        q = q[:-200].rstrip() + "."
    return [("huge attention: 40 long sentences", forty.encode(), len(longs)),
            ("huge attention: 64 KB body", body.encode(), q.count("\n") + 1)]


def huge_attention_client(port, stop, tally, bodies):
    """Expects 200 under 5 MB with a block per sentence (each line is at
    least one), or 413 naming the limit."""
    while not stop.is_set():
        for kind, body, n_sentences in bodies:
            try:
                status, data = http_request(port, "127.0.0.10", "POST", "/translate", body,
                                            {"Content-Type": "application/json"})
            except (OSError, http.client.HTTPException) as e:
                tally.lose(kind, type(e).__name__)
                continue
            if status == 200:
                blocks = len(json.loads(data).get("attention", {}).get("sentences", []))
                outcome = "200 under 5 MB, a block per sentence" if len(data) < 5e6 and blocks >= n_sentences \
                    else f"200 of {len(data)} bytes, {blocks} blocks"
            elif status == 413:
                outcome = "413 naming the limit" if b"cells" in data and b"attention" in data else "413 unclear"
            else:
                outcome = status
            tally.answer(kind, outcome, {"200 under 5 MB, a block per sentence", "413 naming the limit"})
            with tally.lock:
                tally.status[(kind + " answer bytes", "max")] = max(tally.status[(kind + " answer bytes", "max")],
                                                                    len(data))
            stop.wait(5)


def queue_client(port, sentences, tally, k):
    """One request of QUEUE_LINES lines sent just before SIGTERM: answered
    200, or 503 once the drain deadline has passed."""
    q = "\n".join(sentences[(k * QUEUE_LINES + i) % len(sentences)] for i in range(QUEUE_LINES))
    body = json.dumps({"q": q, "source": "en", "target": "es", "beam_size": QUEUE_BEAM, "api_key": KEY})
    try:
        status, data = http_request(port, "127.0.0.%d" % (11 + k % 2), "POST", "/translate", body,
                                    {"Content-Type": "application/json"}, timeout=600)
    except (OSError, http.client.HTTPException) as e:
        tally.lose("full queue at the stop", type(e).__name__)
        return
    if status == 503 and b"drain deadline" not in data:
        status = "503 without the drain message"
    tally.answer("full queue at the stop", status, {200, 503})


def keyless_client(port, stop, tally, sentences):
    rng = random.Random(7)
    while not stop.is_set():
        body = json.dumps({"q": rng.choice(sentences), "source": "en", "target": "es"})
        headers = {"Content-Type": "application/json"}
        if rng.random() < 0.5:
            headers["Authorization"] = "Bearer wrong-key"
        answered("keyless", tally, {403}, lambda: http_request(port, "127.0.0.7", "POST", "/translate", body, headers))
        stop.wait(0.2)


def rss_kib(pid, field="VmRSS"):
    """VmRSS (or VmHWM, the peak) of pid in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def enter_network_namespace():
    """As root, re-runs this script in a network namespace of its own (the
    IPv6 /64 flood needs addresses of its own on the loopback); inside, sets
    them up. True inside such a namespace; False where none can be made."""
    if os.environ.get("PROJMT_ABUSE_NETNS") == "1":
        commands = [["ip", "link", "set", "lo", "up"]]
        commands += [["ip", "-6", "addr", "add", a + "/128", "dev", "lo", "nodad"] for a in IPV6_FLOOD + [IPV6_OTHER]]
        for c in commands:
            subprocess.run(c, check=True)
        return True
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        return False
    os.environ["PROJMT_ABUSE_NETNS"] = "1"
    os.execvp("unshare", ["unshare", "-n", sys.executable] + sys.argv)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projmt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--sentences", required=True, help="English lines, one a line (the first 200 are used)")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    in_namespace = enter_network_namespace()
    host = "::" if in_namespace else "127.0.0.1"

    tmp = tempfile.mkdtemp(prefix="projmt-abuse-")
    with open(a.sentences, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()][:200]
    pool = os.path.join(tmp, "pool.en")
    with open(pool, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    # --split-sentences: the server cuts each text into sentences, so the
    # reference must too (FLORES lines often hold two).
    out = subprocess.run([a.projmt, "translate", "--model", a.model, "--threads", str(a.threads), "--split-sentences",
                          "-i", pool],
                         check=True, capture_output=True, text=True)
    expected = out.stdout.rstrip("\n").split("\n")
    assert len(expected) == len(sentences), "translate gave %d lines for %d" % (len(expected), len(sentences))

    key_file = os.path.join(tmp, "key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    log = open(os.path.join(tmp, "serve.err"), "w+")
    server = subprocess.Popen([a.projmt, "serve", "--model", a.model, "--host", host, "--port", "0",
                               "--threads", str(a.threads),
                               "--api-key-file", key_file, "--max-body", str(MAX_BODY), "--timeout", str(IDLE_TIMEOUT),
                               "--request-timeout", str(REQUEST_TIMEOUT), "--drain-timeout", str(DRAIN_TIMEOUT),
                               "--max-connections-per-ip", str(PER_IP)], stderr=log)
    port = None
    for _ in range(600):
        log.seek(0)
        text = log.read()
        listening = re.search(r"listening on http://\S*:(\d+)/", text)
        if listening:
            port = int(listening.group(1))
            break
        if server.poll() is not None:
            sys.exit("the server did not start:\n" + text)
        time.sleep(0.1)
    warm = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for s in sentences[:8]:   # warm-up: caches, primitives, allocator
        warm.request("POST", "/translate", json.dumps({"q": s, "source": "en", "target": "es", "api_key": KEY}),
                     {"Content-Type": "application/json"})
        warm.getresponse().read()
    warm.close()
    rss_start = rss_kib(server.pid)

    tally = Tally()
    stop = threading.Event()
    valid_stop, stopping = threading.Event(), threading.Event()
    threads = [threading.Thread(target=valid_client, args=(port, sentences, expected, valid_stop, stopping, tally, k))
               for k in range(4)]
    threads += [threading.Thread(target=invalid_client, args=(port, stop, tally, 1)),
                threading.Thread(target=oversized_client, args=(port, stop, tally)),
                threading.Thread(target=trickle_client, args=(port, stop, tally)),
                threading.Thread(target=greedy_client, args=(port, stop, tally)),
                threading.Thread(target=keyless_client, args=(port, stop, tally, sentences)),
                threading.Thread(target=header_trickle_client, args=(port, stop, tally)),
                threading.Thread(target=huge_attention_client, args=(port, stop, tally, attention_bodies(a.sentences)))]
    if in_namespace:
        threads.append(threading.Thread(target=ipv6_flood_client, args=(port, stop, tally)))
    start = time.monotonic()
    for t in threads:
        t.start()
    rss_samples = []
    while time.monotonic() - start < a.minutes * 60:
        time.sleep(10)
        rss_samples.append(rss_kib(server.pid))
    stop.set()
    for t in threads[4:]:
        t.join()
    rss_end = rss_kib(server.pid)
    peak = rss_kib(server.pid, "VmHWM")
    # The first minute of concurrent load grows the heap once (malloc arenas
    # of the connection threads, the decoder's batch buffers): steady state
    # is judged from there.
    rss_1min = rss_samples[min(5, len(rss_samples) - 1)] if rss_samples else rss_end
    load_seconds = time.monotonic() - start

    # The stop under load: the valid clients keep sending, a trickler holds a
    # request open, and a full queue waits (more sentences than the drain
    # deadline has time for).
    drain_trickler = threading.Thread(target=trickle_once, args=(port, threading.Event(), tally, "trickle during the stop"))
    drain_trickler.start()
    queue_threads = [threading.Thread(target=queue_client, args=(port, sentences, tally, k)) for k in range(QUEUE_CLIENTS)]
    for t in queue_threads:
        t.start()
    time.sleep(2)
    stop_start = time.monotonic()
    stopping.set()
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=DRAIN_TIMEOUT + 120)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = "killed (did not stop)"
    stop_seconds = time.monotonic() - stop_start
    valid_stop.set()
    for t in threads[:4] + queue_threads:
        t.join()
    drain_trickler.join()
    log.seek(0)
    stopped_line = [line for line in log.read().splitlines() if "stopped" in line]

    lat = sorted(tally.latency)
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
    lost = sum(tally.lost.values())
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_name(), "cores": os.cpu_count(), "load_average": os.getloadavg(),
        "model": a.model, "minutes": round(load_seconds / 60, 2),
        "answers": {f"{k} {s}": n for (k, s), n in sorted(tally.status.items(), key=str)},
        "unexpected_status": {f"{k} {s}": n for (k, s), n in tally.unexpected.items()},
        "lost": lost, "lost_by_kind": {f"{k} {w}": n for (k, w), n in tally.lost.items()},
        "valid_answers": len(lat), "differing": len(tally.mismatches), "differing_examples": tally.mismatches[:5],
        "latency_ms": {"p50": round(pct(0.5), 1), "p99": round(pct(0.99), 1), "max": round(lat[-1] * 1000, 1) if lat else None},
        "ipv6_flood": "ran (own network namespace, server on ::)" if in_namespace else "skipped (needs root)",
        "peak_kib": peak,
        "rss_kib": {"after_warm_up": rss_start, "after_1_min": rss_1min, "end": rss_end,
                    "min": min(rss_samples + [rss_end]), "max": max(rss_samples + [rss_end]),
                    "change_percent_from_warm_up": round(100 * (rss_end - rss_start) / rss_start, 1),
                    "change_percent_from_1_min": round(100 * (rss_end - rss_1min) / rss_1min, 1),
                    "every_10_s": rss_samples},
        "stop": {"seconds": round(stop_seconds, 1), "drain_timeout": DRAIN_TIMEOUT, "exit": rc,
                 "line": stopped_line[-1] if stopped_line else None},
    }
    print(json.dumps(result, indent=1))
    print("\n| what | figure |\n|---|---|")
    for name, n in result["answers"].items():
        print(f"| {name} | {n} |")
    print(f"| lost answers | {lost} |\n| answers ≠ `projmt translate` | {len(tally.mismatches)} of {len(lat)} |")
    print(f"| valid latency p50 / p99 | {result['latency_ms']['p50']} / {result['latency_ms']['p99']} ms |")
    r = result["rss_kib"]
    print(f"| RSS after warm-up / after 1 min / end | {rss_start} / {rss_1min} / {rss_end} KiB "
          f"({r['change_percent_from_warm_up']:+} % / {r['change_percent_from_1_min']:+} % to the end) |")
    print(f"| server peak (VmHWM) before the stop | {peak} KiB |")
    print(f"| IPv6 /64 flood | {result['ipv6_flood']} |")
    print(f"| stop under load | exit {rc} after {stop_seconds:.1f} s (drain deadline {DRAIN_TIMEOUT} s) |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    ok = lost == 0 and not tally.mismatches and not tally.unexpected and rc == 0 and stop_seconds < DRAIN_TIMEOUT + 30
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
