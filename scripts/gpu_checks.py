#!/usr/bin/env python3
"""The checks and summaries scripts/gpu.sh runs, each exiting non-zero when
what it checks does not hold.

  gpu_checks.py golden ROCMFORGE TESTDATA        stories260K's golden text through `run --device cuda`
  gpu_checks.py families ROCMFORGE ARCH_DIR FAMILY...
                                                 each tiny model through `eval --device cuda` against
                                                 llama.cpp's goldens: first-step logits within 1e-2
                                                 relative L2 (a whole model in f16), or 3x the model's
                                                 f16 sensitivity where it is larger (the median over the
                                                 prompts of the CPU's eval of an f16 copy against its eval
                                                 of the file; tests/gpu/f16_sensitivity.h says why)
  gpu_checks.py ranks ONE.jsonl TWO.jsonl NAME   two `eval` outputs (TP=1 and TP=2) side by side;
                                                 fails when either is empty or they differ in length
  gpu_checks.py ab-means ROWS.tsv                the mean of each side of an A/B and the ratio B / A
  gpu_checks.py longest DURATIONS.csv            the index of the first launch within 90% of the longest
"""
import collections
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

F16_HEADROOM = 3.0  # tests/gpu/f16_sensitivity.h kF16Headroom


def rel_l2(a, b):
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(y * y for y in b))


def parting(a, b):
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)


def golden(rf, td):
    bad = 0
    for line in open(td + "/stories260K.golden.jsonl"):
        g = json.loads(line)
        out = subprocess.run([rf, "run", "--device", "cuda", "--temp", "0", "-n", str(len(g["greedy_tokens"])),
                              "--no-display-prompt", "-p", g["prompt"], "-m", td + "/stories260K.gguf"],
                             capture_output=True, text=True)
        text = out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout
        ok = out.returncode == 0 and text == g["greedy_text"]
        bad += not ok
        print("MATCH" if ok else "DIFF", repr(g["prompt"]), out.stderr.strip().splitlines()[-1:])
    print("golden mismatches:", bad)
    return 1 if bad else 0


def eval_logits(rf, model, prompts, device):
    out = subprocess.run([rf, "eval", "-m", model, "--prompts", prompts, "--device", device], capture_output=True,
                         text=True)
    got = [json.loads(l) for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else []
    return got, out.stderr.strip().splitlines()[-1:]


def f16_sensitivity(rf, model, prompts):
    """Per prompt, how far the CPU's first-step logits move when the weights are rounded to f16."""
    copy = tempfile.mktemp(suffix=".gguf")
    try:
        if subprocess.run([rf, "quantize", model, copy, "f16"], capture_output=True).returncode != 0:
            return None
        plain, _ = eval_logits(rf, model, prompts, "cpu")
        rounded, _ = eval_logits(rf, copy, prompts, "cpu")
    finally:
        if os.path.exists(copy):
            os.remove(copy)
    if not plain or len(plain) != len(rounded):
        return None
    return [rel_l2(r["first_step_logits"], p["first_step_logits"]) for p, r in zip(plain, rounded)]


def families(rf, arch, fams):
    worst, bad = 0.0, 0
    prompts = f"{arch}/prompts.txt"
    for fam in fams:
        model = f"{arch}/tiny-{fam}.gguf"
        got, err = eval_logits(rf, model, prompts, "cuda")
        gold = [json.loads(l) for l in open(f"{arch}/tiny-{fam}.golden.jsonl")]
        sens = f16_sensitivity(rf, model, prompts)
        if len(got) != len(gold) or sens is None:
            print(fam, "FAILED:", err if len(got) != len(gold) else "no f16 sensitivity (quantize or CPU eval failed)")
            bad += 1
            continue
        # (The median: a prompt whose f16 copy routes a token to another expert moves far.)
        bound = max(1e-2, F16_HEADROOM * sorted(sens)[len(sens) // 2])
        for i, (g, w) in enumerate(zip(got, gold)):
            l2 = rel_l2(g["first_step_logits"], w["first_step_logits"])
            part = parting(g["greedy_tokens"], w["greedy_tokens"])
            worst = max(worst, l2 / bound)
            bad += l2 >= bound
            print(f"{fam} prompt {i}: rel L2 {l2:.2e} (bound {bound:.2e}; f16 sensitivity {sens[i]:.2e}), greedy " +
                  ("identical" if part is None else f"parts at {part}"))
    print(f"worst rel L2 {worst:.2f} of its bound")
    return 1 if bad else 0


def ranks(one, two, name):
    a = [json.loads(l) for l in open(one) if l.strip()]
    b = [json.loads(l) for l in open(two) if l.strip()]
    for i, (x, y) in enumerate(zip(a, b)):
        p, q = x["first_step_logits"], y["first_step_logits"]
        err = max(abs(u - v) for u, v in zip(p, q)) / max(abs(u) for u in p)
        part = parting(x["greedy_tokens"], y["greedy_tokens"])
        print(f"{name} prompt {i}: max err / max logit {err:.2e}, rel L2 {rel_l2(q, p):.2e}, greedy "
              + ("identical" if part is None else f"parts at {part}"))
    if not a or len(a) != len(b):
        print(name, "MISSING OUTPUT")
        return 1
    return 0


def ab_means(rows):
    v = collections.defaultdict(list)
    for line in open(rows):
        m, p, t, s, x = line.rstrip("\n").split("\t")
        v[(m, p, t, s)].append(float(x))
    print("| model | parallel | test | A tok/s | B tok/s | B / A |\n|---|---|---|---|---|---|")
    for (m, p, t) in dict.fromkeys(k[:3] for k in v):
        a, b = v.get((m, p, t, "A"), []), v.get((m, p, t, "B"), [])
        if a and b:
            ma, mb = sum(a) / len(a), sum(b) / len(b)
            print(f"| {m} | {p} | {t} | {ma:.1f} | {mb:.1f} | {mb / ma:.3f} |")
    return 0


def longest(path):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if len(rows) < 2:
        print(0)
        return 0
    v = rows[0].index("Metric Value")
    d = [float(r[v].replace(",", "")) for r in rows[1:]]
    print(next(i for i, x in enumerate(d) if x >= 0.9 * max(d)))
    return 0


if __name__ == "__main__":
    what, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if what == "golden" and len(args) == 2:
        sys.exit(golden(*args))
    if what == "families" and len(args) >= 3:
        sys.exit(families(args[0], args[1], args[2:]))
    if what == "ranks" and len(args) == 3:
        sys.exit(ranks(*args))
    if what == "ab-means" and len(args) == 1:
        sys.exit(ab_means(*args))
    if what == "longest" and len(args) == 1:
        sys.exit(longest(*args))
    sys.exit(__doc__)
