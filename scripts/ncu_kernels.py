#!/usr/bin/env python3
"""Prints Nsight Compute's metrics (a --csv run) one line per kernel launch:
the kernel's short name, then each metric's value in the order given.
Usage: ncu_kernels.py CSV [MAX_LINES]"""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 40
if not rows:
    sys.exit(print("no kernels in", sys.argv[1]))
hdr, rows = rows[0], rows[1:]
ii, ki, mi, vi = hdr.index("ID"), hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
launches = collections.OrderedDict()
metrics = []
for r in rows:
    d = launches.setdefault(r[ii], {"name": r[ki].split("(")[0][:60]})
    d[r[mi]] = r[vi]
    if r[mi] not in metrics:
        metrics.append(r[mi])
print("kernel | " + " | ".join(metrics))
for d in list(launches.values())[:limit]:
    print(d["name"] + " | " + " | ".join(d.get(m, "-") for m in metrics))
