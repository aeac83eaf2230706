"""compare_weights.py A B [LABEL]: how two checkpoints' weights differ (bitwise-equal tensors and
the largest absolute difference)."""

import sys

import torch

a, b = (torch.load(p, map_location="cpu", weights_only=True)["model"] for p in sys.argv[1:3])
label = sys.argv[3] if len(sys.argv) > 3 else ""
same = sum(torch.equal(a[k], b[k]) for k in a)
diff = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
print(f"{label}: {same}/{len(a)} tensors bitwise equal, max |diff| {diff:.3g}")
