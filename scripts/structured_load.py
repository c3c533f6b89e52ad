#!/usr/bin/env python3
"""On the GPU machine: what structured output costs a loaded server.

Starts `rocmforge serve` on MODEL, then drives it with C streaming clients
sending N /v1/completions requests of P random prompt tokens and M output
tokens, alternately without and with a JSON schema (response_format
json_schema), ROUNDS times each, all against the same server, after one
free warm-up run; every run has its own random prompts. Every
schema-constrained reply is parsed and checked against the schema. Prints
one JSON line per run (output tok/s, TTFT and TPOT percentiles, mean output
tokens), then a summary with the median ratio constrained / free and the
grammar engine's mask time per step from /metrics.

The schema starts with structure (an enum, a bounded name) and ends with a
free-text summary, so a reply runs to M tokens on a random-weight model.
Python standard library only (a thread per client).
usage: structured_load.py BIN MODEL [--device cuda] [-n 256] [-c 64] [-p 512] [-m 128] [--rounds 2]
"""
import argparse, http.client, json, random, re, statistics, subprocess, sys, threading, time, urllib.request

SCHEMA = {"type": "object", "properties": {
    "mood": {"enum": ["happy", "sad", "curious", "tired"]},
    "name": {"type": "string", "maxLength": 20},
    "age": {"type": "integer", "minimum": 0},
    "summary": {"type": "string"}},
    "required": ["mood", "name", "age", "summary"], "additionalProperties": False}


def schema_prefix_ok(text, finished):
    """The reply is the schema's JSON (finished) or a prefix of it (cut at max_tokens)."""
    if finished:
        try:
            v = json.loads(text)
        except ValueError:
            return False
        return (isinstance(v, dict) and list(v) == ["mood", "name", "age", "summary"] and
                v["mood"] in SCHEMA["properties"]["mood"]["enum"] and isinstance(v["name"], str) and
                len(v["name"]) <= 20 and isinstance(v["age"], int) and v["age"] >= 0 and isinstance(v["summary"], str))
    return text.lstrip().startswith("{")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else 0.0


def one(host, port, body, out):
    t0 = time.perf_counter()
    first = last = None
    text, usage, finish = "", None, None
    conn = http.client.HTTPConnection(host, port, timeout=3600)
    conn.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        out.append({"error": r.status, "body": r.read()[:300].decode(errors="replace")})
        conn.close()
        return
    for raw in r:  # server-sent events, one per line
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"]["completion_tokens"]
        for c in ev.get("choices") or []:
            if c.get("text"):
                last = time.perf_counter()
                first = first or last
                text += c["text"]
            if c.get("finish_reason"):
                finish = c["finish_reason"]
    conn.close()
    n = usage or 0
    out.append({"ttft": (first or t0) - t0, "tpot": (last - first) / (n - 1) if first and n > 1 else None,
                "n": n, "text": text, "finish": finish})


def run(port, model, prompts, clients, max_tokens, constrained):
    out, queue, lock = [], list(range(len(prompts))), threading.Lock()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop()
            body = {"model": model, "prompt": prompts[i], "max_tokens": max_tokens, "temperature": 0,
                    "stream": True, "stream_options": {"include_usage": True}}
            if constrained:
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "card", "schema": SCHEMA}}
            else:  # every free reply runs to max_tokens
                body["ignore_eos"] = True
                body["min_tokens"] = max_tokens
            res = []
            one("127.0.0.1", port, body, res)
            with lock:
                out.extend(res)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [o for o in out if "error" not in o]
    bad = [o for o in ok if constrained and not schema_prefix_ok(o["text"], o["finish"] == "stop")]
    toks = sum(o["n"] for o in ok)
    return {"constrained": constrained, "ok": len(ok), "errors": len(out) - len(ok), "invalid": len(bad),
            "wall_s": round(wall, 2), "output_tok_s": round(toks / wall, 1),
            "mean_tokens": round(toks / max(1, len(ok)), 1),
            "ttft_p50_ms": round(1000 * pct([o["ttft"] for o in ok], 50), 1),
            "ttft_p99_ms": round(1000 * pct([o["ttft"] for o in ok], 99), 1),
            "tpot_p50_ms": round(1000 * pct([o["tpot"] for o in ok if o["tpot"]], 50), 2),
            "first_error": next((o for o in out if "error" in o), None),
            "first_invalid": bad[0]["text"][:300] if bad else None}


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    vals = {}
    for line in text.splitlines():
        m = re.match(r"^(rocmforge_grammar_\w+?)(\{le=\"([^\"]+)\"\})? ([0-9.eE+-]+)$", line)
        if m:
            key = m.group(1) + (f"@{m.group(3)}" if m.group(3) else "")
            vals[key] = float(m.group(4))
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin"), ap.add_argument("model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("-n", type=int, default=256), ap.add_argument("-c", type=int, default=64)
    ap.add_argument("-p", type=int, default=512), ap.add_argument("-m", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=32000, help="prompt token ids are drawn below this")
    a = ap.parse_args()

    proc = subprocess.Popen([a.bin, "serve", "-m", a.model, "--device", a.device, "--port", "0",
                             "--max-num-seqs", str(a.c)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port, deadline = None, time.time() + 300
    while port is None and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on http://[^:\s]+:(\d+)", line)
        port = int(m.group(1)) if m else None
    if port is None:
        print("server did not start"), proc.kill(), sys.exit(1)
    url = f"http://127.0.0.1:{port}"
    while time.time() < deadline:  # 503 while the model loads
        try:
            urllib.request.urlopen(url + "/health", timeout=5)
            break
        except OSError:
            time.sleep(0.5)

    model = json.load(urllib.request.urlopen(url + "/v1/models", timeout=10))["data"][0]["id"]
    rng = random.Random(0)
    def fresh_prompts():  # new ones per run: no run finds another's prompts in the prefix cache
        return [[rng.randrange(300, a.vocab) for _ in range(a.p)] for _ in range(a.n)]
    print(json.dumps({"warm_up": run(port, model, fresh_prompts(), a.c, a.m, False)["output_tok_s"]}), flush=True)
    run(port, model, fresh_prompts()[:a.c], a.c, 16, True)  # the schema compiled
    before = metrics(url)
    results = {False: [], True: []}
    failed = False
    for r in range(a.rounds):
        for constrained in (False, True):
            res = run(port, model, fresh_prompts(), a.c, a.m, constrained)
            print(json.dumps(res), flush=True)
            results[constrained].append(res["output_tok_s"])
            failed |= res["errors"] > 0 or res["invalid"] > 0
    after = metrics(url)
    proc.terminate()
    proc.wait(timeout=30)

    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    steps = d.get("rocmforge_grammar_mask_step_seconds_count", 0)
    buckets = sorted((float(k.split("@")[1]), v) for k, v in d.items()
                     if k.startswith("rocmforge_grammar_mask_step_seconds_bucket@") and "Inf" not in k)
    def bucket_pct(p):  # upper bound of the bucket holding the p-th percentile
        for le, cum in buckets:
            if steps and cum >= p / 100 * steps:
                return le
        return float("inf")
    free, con = statistics.median(results[False]), statistics.median(results[True])
    if failed or free <= 0:
        sys.exit(1)
    print(json.dumps({"free_tok_s": free, "constrained_tok_s": con, "ratio": round(con / free, 3),
                      "mask_steps": int(steps),
                      "mask_ms_per_step_mean": round(1000 * d.get("rocmforge_grammar_mask_step_seconds_sum", 0) / max(1, steps), 3),
                      "mask_ms_per_step_p50_at_most": 1000 * bucket_pct(50),
                      "mask_ms_per_step_p99_at_most": 1000 * bucket_pct(99),
                      "mask_ms_per_step_max_ever": 1000 * after.get("rocmforge_grammar_mask_step_max_seconds", 0),
                      "masks_computed": int(d.get("rocmforge_grammar_masks_computed_total", 0)),
                      "mask_cache_hits": int(d.get("rocmforge_grammar_mask_cache_hits_total", 0))}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
