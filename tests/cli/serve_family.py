#!/usr/bin/env python3
"""`rocmforge serve` end to end on family models beyond Llama (CPU): a chat
completion (plain and streamed) on tiny-gemma3 and tiny-qwen2 returns 200 with
generated text. The tiny files have no chat template, so the server uses
ChatML. Usage: serve_family.py ROCMFORGE TESTDATA_DIR"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

bin_path, testdata = sys.argv[1], sys.argv[2]
if not os.path.isdir(os.path.join(testdata, "arch")):
    print(f"test data missing: {testdata}/arch")
    sys.exit(1 if os.environ.get("ROCMFORGE_REQUIRE_TESTDATA") == "1" else 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read().decode()


fails = 0
for arch in ["gemma3", "qwen2"]:
    port = free_port()
    proc = subprocess.Popen([bin_path, "serve", "-m", os.path.join(testdata, "arch", f"tiny-{arch}.gguf"),
                             "--device", "cpu", "-t", "1", "--port", str(port), "--ctx-size", "256"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.1)
        status, body = post(port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 8, "temperature": 0})
        reply = json.loads(body)
        text = reply["choices"][0]["message"]["content"]
        ok = status == 200 and reply["usage"]["completion_tokens"] > 0 and len(text) > 0
        status2, sse = post(port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True})
        ok = ok and status2 == 200 and sse.rstrip().endswith("data: [DONE]")
        print(f"{'ok  ' if ok else 'FAIL'} tiny-{arch}: chat completion {status} {text!r}, streamed {status2}")
        fails += 0 if ok else 1
    except Exception as e:
        print(f"FAIL tiny-{arch}: {e}")
        fails += 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode != 0:
            print(f"FAIL tiny-{arch}: serve exited with {proc.returncode}\n{out}")
            fails += 1
sys.exit(1 if fails else 0)
