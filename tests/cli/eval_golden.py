#!/usr/bin/env python3
"""`rocmforge eval` on every tiny model of arch/ against llama.cpp's golden
files: the same JSON fields, greedy tokens identical and first-step logits
within 1e-3 of the largest golden logit, per prompt. Prints the measured
errors. Usage: eval_golden.py ROCMFORGE TESTDATA_DIR"""
import json
import os
import subprocess
import sys

bin_path, testdata = sys.argv[1], sys.argv[2]
arch_dir = os.path.join(testdata, "arch")
if not os.path.isdir(arch_dir):
    print(f"test data missing: {arch_dir}")
    sys.exit(1 if "testdata" in os.environ.get("ROCMFORGE_REQUIRE", "").split(",") else 0)
prompts = os.path.join(arch_dir, "prompts.txt")
fails = 0
for arch in ["qwen2", "qwen3", "gemma2", "gemma3", "phi3", "glm4", "mixtral", "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "gemma4", "gemma4moe", "glm4moe", "deepseek2"]:
    model = os.path.join(arch_dir, f"tiny-{arch}.gguf")
    out = subprocess.run([bin_path, "eval", "-m", model, "--prompts", prompts, "--device", "cpu", "-t", "2"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"FAIL tiny-{arch}: rc={out.returncode} stderr={out.stderr.strip()}")
        fails += 1
        continue
    ours = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    with open(os.path.join(arch_dir, f"tiny-{arch}.golden.jsonl")) as f:
        gold = [json.loads(line) for line in f if line.strip()]
    if len(ours) != len(gold):
        print(f"FAIL tiny-{arch}: {len(ours)} lines for {len(gold)} prompts")
        fails += 1
        continue
    for i, (o, g) in enumerate(zip(ours, gold)):
        if sorted(o.keys()) != ["first_step_logits", "greedy_tokens", "prompt_tokens"]:
            print(f"FAIL tiny-{arch} prompt {i}: fields {sorted(o.keys())}")
            fails += 1
            continue
        top = max(abs(x) for x in g["first_step_logits"])
        err = max(abs(a - b) for a, b in zip(o["first_step_logits"], g["first_step_logits"]))
        ok = (o["prompt_tokens"] == g["prompt_tokens"] and o["greedy_tokens"] == g["greedy_tokens"]
              and len(o["first_step_logits"]) == len(g["first_step_logits"]) and err <= 1e-3 * top)
        print(f"{'ok  ' if ok else 'FAIL'} tiny-{arch} prompt {i}: max |logit - golden| {err:.3e} "
              f"(tolerance {1e-3 * top:.3e}), tokens {'same' if o['greedy_tokens'] == g['greedy_tokens'] else 'DIFFER'}")
        fails += 0 if ok else 1
sys.exit(1 if fails else 0)
