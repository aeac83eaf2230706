"""same_lines.py REF HYP LABEL: how many lines of HYP equal REF's (line by line)."""

import os
import sys

ref_path, hyp_path, label = sys.argv[1:4]
if not (os.path.exists(ref_path) and os.path.exists(hyp_path)):
    sys.exit(print(f"{label}: no output"))
ref, hyp = (open(p, encoding="utf-8").read().splitlines() for p in (ref_path, hyp_path))
n = sum(r == h for r, h in zip(ref, hyp, strict=False))
name = os.path.basename(ref_path)
print(f"{label}: {n}/{len(ref)} lines identical to {name} ({len(hyp)} lines)")
