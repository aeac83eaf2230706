"""Every switch of the Transformer family alone, at a non-default value: the one list of model
variants. The tests (tests/variants.py: these, at tiny sizes, and some combinations) and the
benchmarks (benchmarks/variants.py: these on the small preset, and some presets) are built from
it, so a switch added here is tested and benchmarked. Stdlib only: the benchmarks read it too.
"""

from __future__ import annotations

from typing import Any

SWITCHES: dict[str, dict[str, Any]] = {
    "pre_norm": {"pre_norm": True},
    "rmsnorm": {"norm": "rmsnorm"},
    "learned": {"positions": "learned"},
    "relative": {"positions": "relative"},
    "rope": {"positions": "rope"},
    "alibi": {"positions": "alibi"},
    "multi_query": {"kv_heads": 1},
    "grouped_query": {"kv_heads": 2},
    "gelu": {"ffn_activation": "gelu"},
    "swiglu": {"ffn_activation": "swiglu"},
    "geglu": {"ffn_activation": "geglu"},
    "no_bias": {"bias": False},
    "average": {"decoder_self_attention": "average"},
    "shared_layers": {"share_layers": True},
}
