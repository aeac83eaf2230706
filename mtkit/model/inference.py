"""A trained model made ready for decoding, in one place: device, dtype, int8 or packed weights.

``prepare_for_inference`` is what every engine and exporter that runs mtkit's own model calls;
nothing else converts a model for inference. ``resolve_dtype`` says what ``--dtype`` means on a
device (:mod:`mtkit.precision`).

bf16 on CPU is mixed precision, as autocast: the weights of every linear layer are held in bf16
(packed for oneDNN where it can) and multiply bf16-rounded inputs, accumulating in fp32; the
embeddings, norms, attention and the search stay float32. On CUDA, bf16 and fp16 cast the
whole model.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from mtkit.data.tokenizer import BOS_ID, EOS_ID
from mtkit.devices import steady_attention
from mtkit.errors import MtkitError
from mtkit.model.packed import bf16_linears, onednn_available, pack_linears
from mtkit.model.transformer import Transformer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_precision(
    device: torch.device,
    dtype: str,
    quantize: str,
    flags: tuple[str, str] = ("--dtype", "--quantize"),
) -> None:
    """Refuse precisions the device cannot run, with a one-line error (``dtype`` resolved)
    naming the options ``flags`` (the float type's, the quantization's) they came from."""
    dtype_flag, quantize_flag = flags
    if dtype not in DTYPES:
        raise MtkitError(f"{dtype_flag} must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "fp16" and device.type == "cpu":
        raise MtkitError(f"{dtype_flag} fp16 needs a CUDA device; on CPU use fp32 or bf16")
    if dtype == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise MtkitError(f"{dtype_flag} bf16 is not supported by this GPU; use fp16 or fp32")
    if quantize not in ("", "int8"):
        raise MtkitError(f"{quantize_flag} must be int8 (or empty), got {quantize!r}")
    if quantize and (device.type != "cpu" or dtype != "fp32"):
        raise MtkitError(f"{quantize_flag} int8 runs on CPU with {dtype_flag} fp32 only")


def untie_output(model: Transformer) -> Transformer:
    """Give a tied output projection its own nn.Linear, a copy of the target embedding, so that
    int8 quantization and weight packing reach the largest matrix of a small model too."""
    if model.output is None:
        output = nn.Linear(model.cfg.d_model, model.cfg.tgt_vocab_size, bias=False)
        output = output.to(model.tgt_embed.weight.device, model.tgt_embed.weight.dtype)
        output.weight = nn.Parameter(model.tgt_embed.weight.detach().clone())
        model.output = output
    return model


def quantize_int8(model: Transformer) -> nn.Module:
    """Dynamic int8 quantization of every nn.Linear (weights int8, activations quantized per
    batch), output projection included."""
    untie_output(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


def packs_linears(device: torch.device, dtype: str, quantize: str, cpu_matmul: str) -> bool:
    """Whether linear weights are packed for oneDNN: CPU float32 without quantization, when
    asked (``cpu_matmul`` onednn) and where this PyTorch build can."""
    wanted = device.type == "cpu" and dtype == "fp32" and not quantize
    return wanted and cpu_matmul == "onednn" and onednn_available()


def compiles(mode: str, model: nn.Module, device: torch.device) -> bool:
    """Whether ``--compile MODE`` (off, on, auto) compiles ``model``'s step on ``device``: on
    always (:func:`~mtkit.model.compiled.compile_step` refuses what it cannot compile), auto
    where it can (a CPU, a key/value cache), off never."""
    if mode != "auto":
        return mode == "on"
    from mtkit.model.compiled import check_compilable

    try:
        check_compilable(model, device)
    except MtkitError:
        return False
    return True


def prepare_for_inference(
    model: Transformer,
    device: torch.device,
    dtype: str = "fp32",
    quantize: str = "",
    cpu_matmul: str = "onednn",
    compile: bool = False,
) -> nn.Module:
    """``model`` on ``device`` in eval mode, in ``dtype`` (resolved: fp32, bf16 or fp16), then
    int8-quantized, or with linear weights packed for oneDNN (CPU, ``cpu_matmul`` onednn) or
    held in bf16 (CPU bf16 without oneDNN's bf16 kernels), as asked; with ``compile``, its
    decoding step a compiled graph (:mod:`mtkit.model.compiled`)."""
    if compile:
        from mtkit.model.compiled import compile_step

        return compile_step(
            prepare_for_inference(model, device, dtype, quantize, cpu_matmul), device
        )
    check_precision(device, dtype, quantize)
    steady_attention(device)
    if device.type == "cpu" and dtype == "bf16":
        model = untie_output(model.to(device).eval())
        if cpu_matmul == "onednn" and onednn_available(torch.bfloat16):
            return pack_linears(model, torch.bfloat16)
        return bf16_linears(model)
    model = model.to(device, DTYPES[dtype]).eval()
    if quantize:
        return quantize_int8(model)
    if packs_linears(device, dtype, quantize, cpu_matmul):
        return pack_linears(untie_output(model))
    return model


def cache_bytes_per_sentence(
    model: nn.Module, src_len: int = 20, steps: int = 20, beam: int = 1
) -> int:
    """Bytes of decoding state one sentence holds after ``steps`` steps with ``beam`` rows: per
    decoder layer application, the self-attention keys/values of every row (kv_heads heads,
    ``steps`` positions; the average attention keeps one running sum per row instead) and the
    cross-attention keys/values of its ``src_len`` source tokens, held once for all its rows.
    ``model`` is a Transformer (or a packed/int8 copy) on its device and dtype."""
    like = next(model.parameters(), None)
    device = like.device if like is not None else torch.device("cpu")
    src = torch.full((1, src_len), 4, dtype=torch.long, device=device)
    src[0, -1] = EOS_ID
    with torch.inference_mode():
        state = model.start_state(model.encode(src), max_len=steps)
        if beam > 1:
            state.reorder(
                torch.zeros(beam, dtype=torch.long, device=device),
                torch.zeros(1, dtype=torch.long, device=device),
            )
        tokens = torch.full((beam,), BOS_ID, dtype=torch.long, device=device)
        for _ in range(steps):
            model.decode_step(tokens, state)
    return state.nbytes()
