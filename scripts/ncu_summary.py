#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel GPU time (a --csv run with --metrics
gpu__time_duration.sum, optionally dram__bytes_read.sum too: then each
kernel's read rate) by kernel name and prints the largest.
Usage: ncu_summary.py CSV TITLE [TOP]"""
import collections
import csv
import sys

path, title = sys.argv[1], sys.argv[2]
top = int(sys.argv[3]) if len(sys.argv) > 3 else 12
rows = [r for r in csv.reader(open(path)) if len(r) > 10]
if not rows:
    sys.exit(print(f"== {title}: no kernels in {path}"))
hdr, rows = rows[0], rows[1:]
ki, vi, ui = hdr.index("Kernel Name"), hdr.index("Metric Value"), hdr.index("Metric Unit")
mi = hdr.index("Metric Name")
total = collections.defaultdict(float)
count = collections.Counter()
read = collections.defaultdict(float)  # bytes
for r in rows:
    if r[mi] == "dram__bytes_read.sum":
        b, unit = float(r[vi].replace(",", "")), r[ui]
        read[r[ki].split("(")[0][:80]] += b * {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(unit, 1)
        continue
    v, unit = float(r[vi].replace(",", "")), r[ui]
    us = v / 1000 if unit in ("ns", "nsecond") else (v if unit in ("us", "usecond") else v * 1000)
    name = r[ki].split("(")[0][:80]
    total[name] += us
    count[name] += 1
print(f"== {title}: {len(rows)} kernels, {sum(total.values()):.0f} us")
for name, us in sorted(total.items(), key=lambda x: -x[1])[:top]:
    rate = f" {read[name] / us / 1e3:6.0f} GB/s" if name in read else ""
    print(f"{us:10.0f} us {count[name]:5d}x {us / count[name]:8.1f} us each{rate}  {name}")
