#!/usr/bin/env python3
"""Soak test of `rocmforge serve`: for DURATION seconds, 2 x
--max-num-seqs concurrent clients send completions and chat requests, half
of them streamed; 10% of the requests are dropped by their client at a
random moment (while sending, waiting or streaming) and 10% are bad (malformed
JSON or framing, wrong types, oversized heads, unknown routes). Then checks:
  - no 5xx, from the clients' view and in the server's counters;
  - every good request that was not dropped completed (200, full body);
  - every bad one got its 4xx;
  - after the drain: no KV blocks used, nothing running, queued or in flight;
  - every request the engine accepted either finished or was cancelled;
  - resident memory bounded: its growth after the warm-up stays under
    --rss-growth-mb;
  - a server it started exits 0 on SIGTERM.
Python 3 standard library only (asyncio and raw sockets), so it runs where
no npm or pip packages are.

Usage:
  scripts/soak.py --bin build/cpu/src/rocmforge --model ../shared/testdata/stories260K.gguf
                  [--device cpu] [--max-num-seqs 32] [--duration 60] [--server-args "..."]
  scripts/soak.py --url http://127.0.0.1:8080 --max-num-seqs 64 --duration 300
Prints a summary and ends with "N passed, M failed"; exits 1 on any failure.
"""
import argparse
import asyncio
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlparse


# ---- a minimal HTTP/1.1 client over asyncio streams ----

class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body


async def read_response(reader, on_chunk=None):
    """Reads one response (Content-Length, chunked, or to EOF), skipping 1xx."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200:
            continue
        break
    body = bytearray()
    if headers.get("transfer-encoding") == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            chunk = await reader.readexactly(size + 2)
            body += chunk[:-2]
            if on_chunk and await on_chunk(bytes(body)):
                return Response(status, headers, bytes(body))  # the caller leaves mid-stream
    elif "content-length" in headers:
        body += await reader.readexactly(int(headers["content-length"]))
    else:
        body += await reader.read()
    return Response(status, headers, bytes(body))


def http_request(method, path, body=b"", headers=()):
    head = f"{method} {path} HTTP/1.1\r\nHost: soak\r\n"
    for k, v in headers:
        head += f"{k}: {v}\r\n"
    if body or method == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def json_post(path, obj, auth=None):
    headers = [("Content-Type", "application/json")]
    if auth:
        headers.append(("Authorization", f"Bearer {auth}"))
    return http_request("POST", path, json.dumps(obj).encode(), headers)


# ---- the traffic ----

WORDS = "once upon a time there was a little dog who liked to run in the park with his friend".split()


def good_request(rng, stream):
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 24)))
    common = {"max_tokens": rng.randint(1, 96), "stream": stream, "temperature": rng.choice([0, 0.7, 1.0])}
    if rng.random() < 0.3:
        common["ignore_eos"] = True
    if stream and rng.random() < 0.5:
        common["stream_options"] = {"include_usage": True}
    if rng.random() < 0.5:
        return "/v1/completions", {"prompt": prompt, **common}
    return "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], **common}


def bad_request(rng, args):
    """(bytes, expected 4xx statuses)."""
    body = b'{"prompt":"x","max_tokens":2}'
    cases = [
        (http_request("POST", "/v1/completions", b"{not json", [("Content-Type", "application/json")]), {400}),
        (json_post("/v1/completions", {"prompt": 5}), {400}),
        (json_post("/v1/completions", {"prompt": "x", "max_tokens": -3}), {400}),
        (json_post("/v1/chat/completions", {"messages": "hi"}), {400}),
        (json_post("/v1/completions", {"prompt": "x", "max_tokens": 10 ** 9}), {400}),
        (http_request("GET", "/v1/nothing"), {404}),
        (b"POST /v1/completions HTTP/1.1\r\nHost: s\r\nContent-Length: 5\r\nContent-Length: 29\r\n\r\n" + body, {400}),
        (b"POST /v1/completions HTTP/1.1\r\nHost: s\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + body, {400}),
        (b"GET /health HTTP/1.1\r\nHost: s\r\nNoColon\r\n\r\n", {400}),
        (http_request("GET", "/health", headers=[(f"X-H{i}", "v") for i in range(300)]), {431}),
        (http_request("GET", "/v1/models?" + "q" * 20000), {414}),
    ]
    if args.api_key:
        cases.append((json_post("/v1/completions", {"prompt": "x"}, auth="wrong-key"), {401}))
    return rng.choice(cases)


class Stats:
    def __init__(self):
        self.counts = {}
        self.problems = []
        self.health_ms = []

    def add(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n

    def problem(self, text):
        self.add("problems")
        if len(self.problems) < 20:
            self.problems.append(text)


async def one_request(host, port, rng, args, stats):
    kind = rng.random()
    bad = kind < args.bad_rate
    drop = not bad and kind < args.bad_rate + args.disconnect_rate
    stream = rng.random() < 0.5
    if bad:
        data, expected = bad_request(rng, args)
    else:
        path, obj = good_request(rng, stream)
        data = json_post(path, obj, auth=args.api_key or None)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if drop:
            # Leave while sending, while waiting for the answer, or in the middle of a stream.
            moment = rng.choice(["sending", "waiting", "streaming"])
            if moment == "sending":
                writer.write(data[: rng.randint(1, len(data) - 1)])
                await writer.drain()
                await asyncio.sleep(rng.random() * 0.3)
            else:
                writer.write(data)
                await writer.drain()
                if moment == "waiting" or not stream:
                    await asyncio.sleep(rng.random() * 1.5)
                else:
                    events = rng.randint(1, 8)

                    async def enough(body):
                        return body.count(b"data: ") >= events
                    try:
                        r = await read_response(reader, on_chunk=enough)
                        if r.status >= 500:
                            stats.problem(f"dropped request got {r.status}: {r.body[:200]!r}")
                    except (asyncio.IncompleteReadError, ConnectionError):
                        pass
            stats.add("dropped")
            return
        writer.write(data)
        await writer.drain()
        r = await read_response(reader)
        if bad:
            if r.status in expected:
                stats.add("bad_refused")
            else:
                stats.problem(f"bad request got {r.status}, wanted {sorted(expected)}: {data[:80]!r}")
            if r.status >= 500:
                stats.add("5xx")
            return
        if r.status != 200:
            stats.problem(f"good request got {r.status}: {r.body[:300]!r}")
            if r.status >= 500:
                stats.add("5xx")
            return
        if stream:
            if not r.body.endswith(b"data: [DONE]\n\n") or b'"error"' in r.body:
                stats.problem(f"stream did not end well: {r.body[-300:]!r}")
                return
        else:
            j = json.loads(r.body)
            if j.get("usage", {}).get("completion_tokens", 0) < 1:
                stats.problem(f"no completion tokens: {r.body[:300]!r}")
                return
        stats.add("completed")
    except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError) as e:
        if drop:
            stats.add("dropped")
        else:
            stats.problem(f"{'bad' if bad else 'good'} request failed: {type(e).__name__}: {e}")
    finally:
        writer.transport.abort() if drop else writer.close()


async def client(host, port, deadline, seed, args, stats):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        await one_request(host, port, rng, args, stats)


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


async def watch(url, deadline, stats, rss):
    """Samples /health latency and resident memory while the soak runs."""
    loop = asyncio.get_running_loop()
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        try:
            status = await loop.run_in_executor(None, lambda: urllib.request.urlopen(url + "/health", timeout=10).status)
            stats.health_ms.append((time.monotonic() - t0) * 1000)
            if status != 200:
                stats.problem(f"/health answered {status}")
            m = await loop.run_in_executor(None, metrics, url)
            rss.append((time.monotonic(), m.get("process_resident_memory_bytes", 0)))
        except Exception as e:  # noqa: BLE001 - any failure of /health is a finding
            stats.problem(f"/health failed: {e}")
        await asyncio.sleep(0.5)


def five_xx(m):
    return sum(v for k, v in m.items() if k.startswith('rocmforge_http_responses_total{code="5'))


def start_server(args):
    cmd = [args.bin, "serve", "-m", args.model, "--device", args.device, "--port", "0",
           "--max-num-seqs", str(args.max_num_seqs), "--shutdown-timeout", "5"]
    if args.api_key:
        cmd += ["--api-key", args.api_key]
    cmd += shlex.split(args.server_args)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            sys.exit(f"soak: the server exited early:\n{''.join(log)}")
        log.append(line)
        m = re.search(r"listening on http://([^:\s]+):(\d+)", line)
        if m:
            url = f"http://127.0.0.1:{m.group(2)}"
            break
    else:
        sys.exit("soak: the server did not start")
    # Keep draining its log so it never blocks on a full pipe.
    import threading
    threading.Thread(target=lambda: [log.append(l) for l in proc.stderr], daemon=True).start()
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(url + "/health", timeout=5).status == 200:
                return proc, url, log
        except Exception:  # noqa: BLE001 - loading: 503 or not yet listening
            time.sleep(0.2)
    sys.exit("soak: the server never became ready")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (else --bin and --model start one)")
    ap.add_argument("--bin", help="the rocmforge binary")
    ap.add_argument("--model", help="the model to serve")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--server-args", default="", help="more arguments for `rocmforge serve`")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--max-num-seqs", type=int, default=32)
    ap.add_argument("--clients", type=int, default=0, help="default: 2 x --max-num-seqs")
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--disconnect-rate", type=float, default=0.1)
    ap.add_argument("--bad-rate", type=float, default=0.1)
    ap.add_argument("--rss-growth-mb", type=float, default=200, help="allowed growth after the warm-up")
    ap.add_argument("--drain-timeout", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not args.url and not (args.bin and args.model):
        ap.error("give --url, or --bin and --model")
    clients = args.clients or 2 * args.max_num_seqs

    proc, log = None, []
    url = args.url
    if not url:
        proc, url, log = start_server(args)
    u = urlparse(url)
    host, port = u.hostname, u.port or 80

    before = metrics(url)
    stats = Stats()
    rss = []
    t0 = time.monotonic()
    deadline = t0 + args.duration
    print(f"soak: {clients} clients for {args.duration:.0f} s against {url} "
          f"({args.disconnect_rate:.0%} dropped, {args.bad_rate:.0%} bad)", flush=True)

    async def run():
        tasks = [client(host, port, deadline, args.seed * 100003 + i, args, stats) for i in range(clients)]
        await asyncio.gather(watch(url, deadline, stats, rss), *tasks)
    asyncio.run(run())
    ran = time.monotonic() - t0

    # Drain: everything the clients left behind ends.
    m = metrics(url)
    drain_deadline = time.monotonic() + args.drain_timeout
    while time.monotonic() < drain_deadline:
        m = metrics(url)
        if (m["rocmforge_running_sequences"] == 0 and m["rocmforge_queue_depth"] == 0 and
                m["rocmforge_kv_blocks_used"] == 0 and m["rocmforge_http_requests_in_flight"] == 0):
            break
        time.sleep(0.2)
    drained = time.monotonic() - (drain_deadline - args.drain_timeout)

    d = lambda k: m.get(k, 0) - before.get(k, 0)  # noqa: E731
    warm = [v for t, v in rss if t - t0 > min(10, args.duration / 4)] or [v for _, v in rss] or [0]
    rss_growth = (max(warm) - warm[0]) / 2**20
    health = sorted(stats.health_ms) or [0]
    c = stats.counts
    print(f"soak: ran {ran:.1f} s; requests: {c.get('completed', 0)} completed, {c.get('dropped', 0)} dropped by "
          f"their client, {c.get('bad_refused', 0)} bad ones refused; {c.get('problems', 0)} problems")
    print(f"soak: engine: {d('rocmforge_requests_total'):.0f} accepted, {d('rocmforge_requests_finished_total'):.0f} "
          f"ended ({d('rocmforge_requests_cancelled_total'):.0f} cancelled), "
          f"{d('rocmforge_generation_tokens_total'):.0f} tokens; drained in {drained:.1f} s; "
          f"KV blocks used {m['rocmforge_kv_blocks_used']:.0f}")
    print(f"soak: /health p50 {health[len(health) // 2]:.1f} ms, p99 {health[int(len(health) * 0.99)]:.1f} ms, "
          f"max {health[-1]:.1f} ms; RSS {warm[0] / 2**20:.0f} -> {warm[-1] / 2**20:.0f} MB "
          f"(max growth {rss_growth:.0f} MB)")
    for p in stats.problems:
        print(f"soak: problem: {p}")

    checks = [
        ("no 5xx seen by the clients", c.get("5xx", 0) == 0),
        ("no 5xx in the server's counters", five_xx(m) - five_xx(before) == 0),
        ("every good request completed and every bad one got its 4xx", c.get("problems", 0) == 0),
        ("traffic of all kinds ran", c.get("completed", 0) > 0 and c.get("dropped", 0) > 0 and c.get("bad_refused", 0) > 0),
        ("drained: nothing running, queued or in flight, no KV blocks used",
         m["rocmforge_running_sequences"] == 0 and m["rocmforge_queue_depth"] == 0 and
         m["rocmforge_kv_blocks_used"] == 0 and m["rocmforge_http_requests_in_flight"] == 0),
        ("every accepted request finished or was cancelled",
         d("rocmforge_requests_total") == d("rocmforge_requests_finished_total")),
        ("clients that left were cancelled", d("rocmforge_requests_cancelled_total") > 0),
        (f"resident memory grew less than {args.rss_growth_mb:.0f} MB after the warm-up", rss_growth < args.rss_growth_mb),
    ]
    if proc:
        t = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = None
        print(f"soak: server exit {code} after SIGTERM in {time.monotonic() - t:.1f} s")
        checks.append(("the server exits 0 on SIGTERM", code == 0))
        if code != 0:
            print("".join(log[-30:]))
    failed = 0
    for name, ok in checks:
        print(f"soak: {'ok  ' if ok else 'FAIL'} {name}")
        failed += not ok
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
