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
  greedy     opens 40 connections at once from 127.0.0.6: counts how many the
             per-address limit closed at accept, then closes them
  keyless    valid requests without a key, and a wrong Bearer key: expects 403
At the end: SIGTERM while the valid clients and a trickler still run; the
time to exit is compared with --drain-timeout.

Reports answers by status (and "cut": connections the server closed as
intended), lost answers (a request that should have been answered and was
not), answers that differ from `projmt translate`, p50/p99 latency of the
valid requests, the server's RSS after warm-up and at the end, and the stop.
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
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEY = "abuse-run-key"
MAX_BODY = 4096
REQUEST_TIMEOUT = 20
DRAIN_TIMEOUT = 10
IDLE_TIMEOUT = 5
PER_IP = 16


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
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
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


def keyless_client(port, stop, tally, sentences):
    rng = random.Random(7)
    while not stop.is_set():
        body = json.dumps({"q": rng.choice(sentences), "source": "en", "target": "es"})
        headers = {"Content-Type": "application/json"}
        if rng.random() < 0.5:
            headers["Authorization"] = "Bearer wrong-key"
        answered("keyless", tally, {403}, lambda: http_request(port, "127.0.0.7", "POST", "/translate", body, headers))
        stop.wait(0.2)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


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

    tmp = tempfile.mkdtemp(prefix="projmt-abuse-")
    with open(a.sentences, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()][:200]
    pool = os.path.join(tmp, "pool.en")
    with open(pool, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    out = subprocess.run([a.projmt, "translate", "--model", a.model, "--threads", str(a.threads), "-i", pool],
                         check=True, capture_output=True, text=True)
    expected = out.stdout.rstrip("\n").split("\n")
    assert len(expected) == len(sentences), "translate gave %d lines for %d" % (len(expected), len(sentences))

    key_file = os.path.join(tmp, "key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    log = open(os.path.join(tmp, "serve.err"), "w+")
    server = subprocess.Popen([a.projmt, "serve", "--model", a.model, "--port", "0", "--threads", str(a.threads),
                               "--api-key-file", key_file, "--max-body", str(MAX_BODY), "--timeout", str(IDLE_TIMEOUT),
                               "--request-timeout", str(REQUEST_TIMEOUT), "--drain-timeout", str(DRAIN_TIMEOUT),
                               "--max-connections-per-ip", str(PER_IP)], stderr=log)
    port = None
    for _ in range(600):
        log.seek(0)
        text = log.read()
        if "listening on http://127.0.0.1:" in text:
            port = int(text.split("listening on http://127.0.0.1:")[1].split("/")[0])
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
                threading.Thread(target=keyless_client, args=(port, stop, tally, sentences))]
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
    # The first minute of concurrent load grows the heap once (malloc arenas
    # of the connection threads, the decoder's batch buffers): steady state
    # is judged from there.
    rss_1min = rss_samples[min(5, len(rss_samples) - 1)] if rss_samples else rss_end
    load_seconds = time.monotonic() - start

    # The stop under load: the valid clients keep sending, a trickler holds a request open.
    drain_trickler = threading.Thread(target=trickle_once, args=(port, threading.Event(), tally, "trickle during the stop"))
    drain_trickler.start()
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
    for t in threads[:4]:
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
    print(f"| stop under load | exit {rc} after {stop_seconds:.1f} s (drain deadline {DRAIN_TIMEOUT} s) |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    ok = lost == 0 and not tally.mismatches and not tally.unexpected and rc == 0 and stop_seconds < DRAIN_TIMEOUT + 30
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
