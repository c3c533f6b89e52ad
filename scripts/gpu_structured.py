#!/usr/bin/env python3
"""On the GPU machine: structured output through `rocmforge serve --device
cuda` on stories260K — a JSON schema (greedy, sampled with n = 4) and a GBNF
grammar — each reply checked independently; exits non-zero on any failure.
Usage: scripts/gpu_structured.py BIN TESTDATA [DEVICE]"""
import json, re, subprocess, sys, time, urllib.request

bin_, testdata = sys.argv[1], sys.argv[2]
device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
proc = subprocess.Popen([bin_, "serve", "-m", f"{testdata}/stories260K.gguf", "--device", device, "--port", "0"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
port, log = None, ""
deadline = time.time() + 60
while port is None and time.time() < deadline:
    line = proc.stdout.readline()
    log += line
    m = re.search(r"listening on http://[^:\s]+:(\d+)", line)
    if m:
        port = int(m.group(1))
if port is None:
    print("server did not start:\n" + log); proc.kill(); sys.exit(1)

while time.time() < deadline:  # the port opens before the model has loaded (503 until then)
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
        break
    except OSError:
        time.sleep(0.1)

def post(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))

schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "happy": {"type": "boolean"},
          "color": {"enum": ["red", "green", "blue"]}}, "required": ["name", "happy", "color"],
          "additionalProperties": False}
def valid(v):
    return (isinstance(v, dict) and sorted(v) == ["color", "happy", "name"] and isinstance(v["name"], str)
            and len(v["name"]) <= 12 and isinstance(v["happy"], bool) and v["color"] in ("red", "green", "blue"))

bad = 0
msgs = [{"role": "user", "content": "Tell me about a girl."}]
fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}
for temp, n in ((0, 1), (1.0, 4)):
    r = post({"messages": msgs, "response_format": fmt, "temperature": temp, "n": n, "seed": 3, "max_tokens": 200})
    for c in r["choices"]:
        text = c["message"]["content"]
        try:
            ok = c["finish_reason"] == "stop" and valid(json.loads(text))
        except ValueError:
            ok = False
        bad += not ok
        print("OK  " if ok else "BAD ", f"temperature {temp}:", text)
r = post({"messages": msgs, "grammar": 'root ::= ("yes" | "no") " because " [a-z ]{1,20} "."', "temperature": 1.0,
          "seed": 5, "max_tokens": 60})
text = r["choices"][0]["message"]["content"]
ok = re.fullmatch(r"(yes|no) because [a-z ]{1,20}\.", text) is not None
bad += not ok
print("OK  " if ok else "BAD ", "grammar:", text)
proc.terminate()
proc.wait(timeout=20)
print(f"structured output through {device}:", "all valid" if bad == 0 else f"{bad} invalid")
sys.exit(1 if bad else 0)
