#!/usr/bin/env python3
"""Layer check (DESIGN.md, "The parts, and which way they depend"): every
#include "..." under src/ must point into a layer its own layer may use.
Prints each offending line as FILE:LINE: ... and exits 1; exits 0 when clean.
Usage: scripts/check_layers.py [SRC_DIR]   (default: src/ beside this script)
       scripts/check_layers.py --self-test  (plants violations in a copy of src/
                                             and checks that each is caught)
"""
import pathlib
import re
import shutil
import sys
import tempfile

# Each layer and the layers it may include (itself included). Checked
# first-match on the file's path under src/, so narrower rules come first.
RULES = [
    # The scheduler and its data are GPU-free: no backend, no model.
    ("engine/scheduler", {"core", "kv", "engine/scheduler", "engine/sequence"}),
    ("engine/sequence", {"core", "kv"}),
    ("engine/", {"core", "gguf", "tokenizer", "template", "grammar", "kv", "backend", "model", "engine"}),
    # The server sees the engine only through its serving interface.
    ("server/", {"core", "tokenizer", "template", "grammar", "server", "engine/serving", "engine/request",
                 "engine/metrics"}),
    ("model/", {"core", "gguf", "kv", "backend", "model"}),
    ("backend/", {"core", "backend"}),
    ("kv/", {"core", "kv"}),
    ("tokenizer/", {"core", "gguf", "tokenizer"}),
    ("template/", {"core", "template"}),
    ("grammar/", {"core", "tokenizer", "grammar"}),
    ("gguf/", {"core", "gguf"}),
    ("core/", {"core"}),
    ("cli/", None),  # the top: may use everything
]

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def allowed(target, prefixes):
    return any(target == p or target.startswith(p + "/") or target.startswith(p + ".") or
               target.startswith(p + "_") for p in prefixes)


def check(src):
    """The offending lines under src (empty when clean) and the file count."""
    bad = []
    files = sorted(p for p in src.rglob("*") if p.suffix in {".h", ".hpp", ".cpp", ".cu", ".cuh"})
    for path in files:
        rel = path.relative_to(src).as_posix()
        rule = next((r for r in RULES if rel.startswith(r[0])), None)
        if rule is None:
            bad.append(f"{src / rel}:1: not in any layer of scripts/check_layers.py")
            continue
        prefixes = rule[1]
        if prefixes is None:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue  # same-directory or system-style includes
            target = m.group(1)
            if not allowed(target, prefixes):
                bad.append(f"{src / rel}:{n}: {rule[0].rstrip('/')} may not include \"{target}\": {line.strip()}")
    return bad, len(files)


# (file under src/, include planted in it): each must be reported.
PLANTS = [
    ("server/protocol.h", "backend/backend.h"),
    ("server/generation.cpp", "engine/engine.h"),
    ("server/chat_prompt.cpp", "gguf/reader.h"),
    ("server/model_service.h", "model/model.h"),
    ("kv/block_pool.h", "backend/tensor.h"),
    ("engine/scheduler.cpp", "backend/backend.h"),
    ("engine/scheduler.h", "model/model.h"),
    ("tokenizer/vocab.h", "backend/backend.h"),
    ("tokenizer/tokenizer.h", "template/chat_template.h"),
    ("template/jinja_value.h", "tokenizer/tokenizer.h"),
    ("template/chat_template.cpp", "gguf/reader.h"),
    ("grammar/matcher.h", "engine/engine.h"),
    ("grammar/gbnf.cpp", "template/chat_template.h"),
    ("core/error.h", "gguf/reader.h"),
]


def self_test():
    real = pathlib.Path(__file__).parent.parent / "src"
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "src"
        shutil.copytree(real, copy)
        already, _ = check(copy)
        if already:
            print("check_layers self-test: the tree itself is not clean")
            return 1
        for rel, target in PLANTS:
            path = copy / rel
            before = path.read_text()
            path.write_text(before + f'#include "{target}"\n')
            bad, _ = check(copy)
            path.write_text(before)
            hit = [b for b in bad if b.startswith(f"{path}:") and target in b]
            print(f"check_layers self-test: planted {target} in {rel}: " + (hit[0] if hit else "NOT CAUGHT"))
            failures += not hit
    print(f"check_layers self-test: {len(PLANTS) - failures} of {len(PLANTS)} planted violations caught")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    bad, n_files = check(src)
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} include(s) cross the layers of DESIGN.md", file=sys.stderr)
        return 1
    print(f"check_layers: {n_files} files, every include within its layer's reach")
    return 0


if __name__ == "__main__":
    sys.exit(main())
