#!/usr/bin/env python3
"""serve_load.py — load test for `projmt serve`: C concurrent clients, each
sending R POST /translate requests of one sentence back to back over its own
keep-alive connection (a closed loop, as editors and bots use the API).

Client c's request r translates sentence (c * R + r) mod N of --sentences, so
a run covers C*R lines of the file in order. With --expected (the
`projmt translate` output of the same file) every answer is compared.

Prints a table and one JSON line: requests, errors (non-200 or broken
connections), lost (no answer), mismatches, sentences/s, p50/p99 latency and
the mean decoder batch size (from /metrics before and after).

usage: serve_load.py --url http://127.0.0.1:PORT --sentences FILE [--clients 50]
                     [--requests 20] [--expected FILE] [--beam N]"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse


def metrics(url):
    """/metrics as {series: value}; {} when the server is gone (stopped under load)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return {}
    finally:
        conn.close()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            values[key] = float(value)
    return values


def client(url, sentences, expected, first, count, beam, timeout, until_refused, out):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    for r in range(count):
        i = (first + r) % len(sentences)
        body = {"q": sentences[i], "source": "en", "target": "es"}
        if beam:
            body["beam_size"] = beam
        start = time.monotonic()
        try:
            conn.request("POST", "/translate", json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            seconds = time.monotonic() - start
            if response.status != 200:
                out.append(("error", seconds, f"status {response.status}: {data[:200]!r}"))
                continue
            text = json.loads(data)["translatedText"]
            ok = expected is None or text == expected[i]
            out.append(("ok" if ok else "mismatch", seconds, None if ok else f"line {i + 1}: {text!r} != {expected[i]!r}"))
        except ConnectionRefusedError as e:
            if until_refused:  # the server has stopped: this client is done
                out.append(("unsent", 0.0, count - r))
                break
            out.append(("error", time.monotonic() - start, repr(e)))
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            out.append(("error", time.monotonic() - start, repr(e)))
            conn.close()
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    conn.close()


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--sentences", required=True)
    ap.add_argument("--expected")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--beam", type=int, default=0, help="beam_size per request (0 = the server's default)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds without an answer before a request counts as an error")
    ap.add_argument("--until-refused", action="store_true",
                    help="a client stops when a connection is refused (the server stopped); its unsent requests are not lost")
    args = ap.parse_args()
    sentences = open(args.sentences, encoding="utf-8").read().splitlines()
    expected = open(args.expected, encoding="utf-8").read().splitlines() if args.expected else None
    before = metrics(args.url)
    results = [[] for _ in range(args.clients)]
    threads = [threading.Thread(target=client, args=(args.url, sentences, expected, c * args.requests,
                                                     args.requests, args.beam, args.timeout, args.until_refused, results[c]))
               for c in range(args.clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    after = metrics(args.url)
    flat = [r for per_client in results for r in per_client if r[0] != "unsent"]
    unsent = sum(r[2] for per_client in results for r in per_client if r[0] == "unsent")
    sent = args.clients * args.requests - unsent
    latencies = [s for kind, s, _ in flat if kind != "error"]
    batches = after.get("projmt_batch_size_count", 0) - before.get("projmt_batch_size_count", 0) if after else 0
    batched = after.get("projmt_batch_size_sum", 0) - before.get("projmt_batch_size_sum", 0) if after else 0
    summary = {
        "clients": args.clients, "requests": sent, "unsent": unsent, "answered": len(flat),
        "errors": sum(kind == "error" for kind, _, _ in flat), "lost": sent - len(flat),
        "mismatches": sum(kind == "mismatch" for kind, _, _ in flat) if expected else None,
        "seconds": round(wall, 3), "sentences_per_second": round(len(latencies) / wall, 2),
        "p50_ms": round(1e3 * percentile(latencies, 0.50), 1), "p99_ms": round(1e3 * percentile(latencies, 0.99), 1),
        "mean_batch": round(batched / batches, 2) if batches else None, "batches": int(batches),
        "batched_sentences": int(batched),
    }
    for kind, _, why in flat:
        if why:
            print(f"{kind}: {why}")
            break
    print(f"{'clients x requests':>20} {args.clients} x {args.requests}")
    for key in ("answered", "errors", "lost", "mismatches", "seconds", "sentences_per_second", "p50_ms", "p99_ms",
                "mean_batch"):
        print(f"{key:>20} {summary[key]}")
    print(json.dumps(summary))
    bad = summary["errors"] or summary["lost"] or summary["mismatches"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
