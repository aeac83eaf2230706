"""The decoder's step as one compiled graph (``--compile``): the model's own
:meth:`~mtkit.model.transformer.Transformer.decode_step`, exported with ``torch.export`` and
compiled ahead of time by AOTInductor into a shared library, for CPU decoding.

What a step costs besides its linear layers (norms, residuals, rotations, the cache write,
attention over a few keys, hundreds of small kernels and the Python between them) is what a
compiled graph saves: inductor fuses the elementwise work into a few C++ loops and calls the
rest as kernels, without Python in between. The step is the model's own code, traced through
(every position scheme, norm and feed-forward variant comes with it); only its inputs change:
the step's cache tensors and the position ``t`` go in as arguments (``t`` as the length of an
empty tensor), so one graph serves every later step, sentence, batch and beam size up to
:data:`~mtkit.model.layers.COMPILED_QUERIES` rows a sentence (the first step, with one
position cached, and wider beams: eager steps).

The caches are pointer caches (:class:`~mtkit.model.pointer_cache.PointerCache`): as beams move, the
search's reorder gathers each row's pointers to the buffer rows that hold its keys/values, not
the keys and values themselves (a copy of every cached position a step, 1-2.5 ms of a 6-10 ms
step at 160 rows); the graph reads them through the pointers, in the attention's own loops.

Compiled once per machine, not per run: the library is kept in a user cache
(:func:`cache_dir`) under a key of everything the code depends on (the model's
configuration and tensor shapes, its linear layers' kinds, the traced source files, the
torch version, the CPU's instruction set), without the weights, which the loaded library
reads from the model in memory; so every checkpoint of one architecture shares one library,
and a run that finds it loads it in about a second. A library built for something else is
never used, only missed (another key).

Linear layers whose weights are prepared for a CPU library (int8 ``torch.ao`` dynamic
quantization on fbgemm, weights packed for oneDNN) hold opaque objects that cannot be traced;
each becomes an :class:`~mtkit.model.opaque.OpaqueLinear`, which inside the graph calls the
very same kernel through one custom operator (``mtkit::linear``, by the layer's number in its
model), whose own kernel is C++ (:mod:`mtkit.model.linear_kernel`, built once per machine;
the Python one where it cannot be built); a bf16 layer's input is rounded in the graph, fused
with the code before it. So the compiled step computes what the eager step computes, by the
same kernels for the linear layers and by inductor's fused code elsewhere (float32 rounding
differs).

Several positions at once (speculative decoding's check of a draft's proposals, one row a
source) go through a second graph of the same step, ``decode_steps``, built on its first use
(a draft's one new position a call goes through the first); a decode that rows joined
(step-level batching: each row at its own position, reading no slot before its first) through
a third, which takes each row's first slot too, built on its first use. A scheduling engine (a
server) also encodes through a graph (:meth:`CompiledStep.prepare_joins`): its rows arrive a
few at a time, where an eager encoder's hundred small kernels and the Python between them cost
more than its products (2.8 -> 1.0 ms for one 15-piece sentence, 4.3 -> 1.5 ms for four of 20,
demo model, bf16, 2 AMX cores). Not compiled (eager, same output): the first step, steps
that record cross-attention (``--alignment``), a shortlist's projection, more than
:data:`~mtkit.model.layers.COMPILED_QUERIES` rows a source or positions at once. The average
attention (``decoder_self_attention: average``) keeps a running sum instead of a key/value
cache and is refused by name.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.export import Dim

from mtkit.cpu import cpu_flags
from mtkit.errors import MtkitError
from mtkit.model import linear_kernel
from mtkit.model.attention import COMPILED_QUERIES
from mtkit.model.opaque import OpaqueLinear, bind, opaque_layer, running
from mtkit.model.packed import replace_modules
from mtkit.model.pointer_cache import PointerCache
from mtkit.model.state import DecoderState, KeyValueCache, LayerState, SourceCache
from mtkit.model.transformer import EncoderOut, Transformer

_TRACED = Path(__file__).parent  # the model's source files: traced into the graph


def check_compilable(model: nn.Module, device: torch.device) -> None:
    """Refuse, in one line, what ``--compile`` cannot compile."""
    if device.type != "cpu":
        raise MtkitError(
            f"--compile compiles the CPU decoding step; it does not run on "
            f"{device.type} (leave it out)"
        )
    variant = getattr(getattr(model, "cfg", None), "decoder_self_attention", "attention")
    if variant != "attention":
        raise MtkitError(
            f"--compile: decoder_self_attention '{variant}' keeps no key/value "
            "cache and is not compiled; translate without --compile"
        )


def cache_dir() -> Path:
    """Where compiled steps are kept between runs: ``$MTKIT_COMPILED_DIR`` if set, else
    ``$XDG_CACHE_HOME/mtkit/compiled`` (``~/.cache/mtkit/compiled``)."""
    if os.environ.get("MTKIT_COMPILED_DIR"):
        return Path(os.environ["MTKIT_COMPILED_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mtkit" / "compiled"


def compile_step(model: nn.Module, device: torch.device, build: str = "aoti") -> nn.Module:
    """In place: ``model``'s (a prepared Transformer's) ``decode_step`` becomes a compiled
    graph, loaded from the user cache or compiled into it (minutes); opaque linear layers are
    swapped for :class:`OpaqueLinear`. Returns the model. ``build``: ``aoti`` (AOTInductor's
    library) or ``export`` (the exported graph run by torch; tests: what was traced, without
    compiling it)."""
    check_compilable(model, device)
    replace_modules(model, opaque_layer)
    model.decode_step = CompiledStep(model, build)
    model.decode_steps = functools.partial(_decode_steps, model)
    model.encode = model.decode_step.encode
    model.start_state = functools.partial(_start_state, model)
    return model


def _decode_steps(model: nn.Module, tokens: Tensor, state: DecoderState) -> Tensor:
    """``decode_steps`` (speculative decoding): one position, the draft's usual call, through
    the compiled step; several (the models' check of a draft's proposals) through the
    compiled graph of several positions (:meth:`CompiledStep.steps`)."""
    if tokens.shape[1] == 1:
        return model.decode_step(tokens[:, 0], state)[:, None]
    return model.decode_step.steps(tokens, state)


def _start_state(
    model: nn.Module, enc: EncoderOut, max_len: int, alignment_layer: int | None = None
) -> DecoderState:
    """The model's start state with one step more room in its caches than asked (the last
    step then never fills its buffer: the graph is exported for a cache prefix shorter than
    its buffer, whose strides differ from a full buffer's; it guards on that), each a
    :class:`~mtkit.model.pointer_cache.PointerCache`: as the beams move, the search's reorder moves
    pointers, and the graph reads each row's keys/values through them (values in bf16 where
    a bf16 layer made them: :func:`_values_dtype`)."""
    state = Transformer.start_state(model, enc, max_len + 1, alignment_layer)
    values = _values_dtype(model)
    for layer in state.layers:
        if isinstance(layer.own, KeyValueCache):
            layer.own = PointerCache.of(layer.own, values)
    return state


def _values_dtype(model: nn.Module) -> torch.dtype | None:
    """bf16 where every decoder layer's values come out of a bf16 layer (its kernel rounds
    them: kept in bf16 they are the same numbers), else None (the keys' dtype). Attention
    over the cache reads keys and values from memory (the gather through the pointers), so
    bf16 values save a quarter of its bytes: at 160 rows over 30-45 slots a step took
    0.80-0.92x as long on one thread (benchmarks/bench_compiled_step.py)."""
    projections = [
        getattr(layer.self_attn, "qkv", None) or getattr(layer.self_attn, "kv", None)
        for layer in model.decoder_stack()
    ]
    bf16 = [isinstance(p, OpaqueLinear) and p.kind == "bf16" for p in projections]
    return torch.bfloat16 if bf16 and all(bf16) else None


def _dense(x: Tensor) -> Tensor:
    """``x`` if it has the standard strides of its shape, else a copy that has them (even
    where ``contiguous`` would keep odd strides of dimensions of size 1): the graph reads its
    inputs with the strides it was traced with."""
    strides, step = [], 1
    for size in reversed(x.shape):
        strides.append(step)
        step *= size
    if x.stride() == tuple(reversed(strides)):
        return x
    return torch.empty(x.shape, dtype=x.dtype, device=x.device).copy_(x)


class _Step(nn.Module):
    """The step as a module over the state's tensors (what is exported): tokens (N sources,
    G rows each), a tensor of length t + 1 (the position, as a size), the caches' key and
    value buffers (P >= N * G, H, L, Dh) and their rows' pointers (N * G, L), the source keys
    and values (N, H, S, Dh), the source mask (N, 1, 1, S)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        tokens: Tensor,
        position: Tensor,
        keys: list[Tensor],
        values: list[Tensor],
        origins: list[Tensor],
        source_keys: list[Tensor],
        source_values: list[Tensor],
        src_keep: Tensor,
    ) -> Tensor:
        # rows as N sources x G: every size in the graph a product of the two (a row count
        # divided by a group size makes inductor's loops divide for every element)
        state = _state(
            position, tokens.shape[1], keys, values, origins, source_keys, source_values, src_keep
        )
        return Transformer.decode_step(self.model, tokens.reshape(-1), state)


class _Steps(_Step):
    """Several positions at once, one row per source (speculative decoding's check of a
    draft's proposals, greedy): tokens (N, Q), the rest as :class:`_Step`'s."""

    def forward(
        self,
        tokens: Tensor,
        position: Tensor,
        keys: list[Tensor],
        values: list[Tensor],
        origins: list[Tensor],
        source_keys: list[Tensor],
        source_values: list[Tensor],
        src_keep: Tensor,
    ) -> Tensor:
        state = _state(position, 1, keys, values, origins, source_keys, source_values, src_keep)
        return Transformer.decode_steps(self.model, tokens, state)


class _Joined(_Step):
    """The step of a decode that rows joined (step-level batching): :class:`_Step`'s inputs
    and each row's first slot, ``first`` (R,): each row at its own position, reading no slot
    before its first (:meth:`~mtkit.model.state.DecoderState.join`)."""

    def forward(
        self,
        tokens: Tensor,
        position: Tensor,
        keys: list[Tensor],
        values: list[Tensor],
        origins: list[Tensor],
        source_keys: list[Tensor],
        source_values: list[Tensor],
        src_keep: Tensor,
        first: Tensor,
    ) -> Tensor:
        state = _state(
            position, tokens.shape[1], keys, values, origins, source_keys, source_values, src_keep
        )
        state.first = first
        return Transformer.decode_step(self.model, tokens.reshape(-1), state)


class _Encode(nn.Module):
    """The encoder over source rows (B, S): its memory (B, S, D) and the padding mask (B, 1,
    1, S) (a graph always masks)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        out = Transformer.encode(self.model, src)
        assert out.src_keep is not None
        return out.memory, out.src_keep


# the graphs, by kind: a step of one position a row, of several (speculative decoding's check),
# of one position a row of a decode that rows joined; the encoder
GRAPHS: dict[str, type[nn.Module]] = {
    "step": _Step,
    "steps": _Steps,
    "joined": _Joined,
    "encode": _Encode,
}


def _state(
    position: Tensor,
    group: int,
    keys: list[Tensor],
    values: list[Tensor],
    origins: list[Tensor],
    source_keys: list[Tensor],
    source_values: list[Tensor],
    src_keep: Tensor,
) -> DecoderState:
    """The decoding state of :class:`_Step`'s inputs, at position ``len(position) - 1``."""
    t = position.shape[0] - 1
    layers = [
        LayerState(PointerCache(k, v, t, origin=o), SourceCache(sk, sv))
        for k, v, o, sk, sv in zip(keys, values, origins, source_keys, source_values, strict=True)
    ]
    return DecoderState(layers, src_keep, offset=t, group=group)


def _key(model: nn.Module, linears: list[OpaqueLinear]) -> str:
    """What a compiled step depends on, hashed: the model's configuration, tensor names and
    shapes, its opaque layers' kinds, the source files traced, torch and the CPU's flags."""
    tensors = (
        *model.named_parameters(remove_duplicate=False),
        *model.named_buffers(remove_duplicate=False),
    )
    parts = (
        repr(getattr(model, "cfg", None)),
        repr(getattr(model, "special_ids", None)),
        *(f"{name}:{tuple(t.shape)}:{t.dtype}" for name, t in tensors),
        *(f"{m.kind}:{m.out_features}" for m in linears),
        *(path.read_text() for path in sorted(_TRACED.glob("*.py"))),
        f"{torch.__version__} {platform.machine()} {torch.backends.cpu.get_cpu_capability()}",
        " ".join(sorted(cpu_flags())),
    )
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def _example(model: nn.Module, queries: int = 0, joined: bool = False) -> tuple:
    """Inputs of :class:`_Step` from the model itself: 3 sources of 5 tokens, 2 rows each, in
    buffers of 8 rows (4 sources before one left), position 4 in caches of 7 (sizes all
    different, none 0 or 1). ``queries``: :class:`_Steps`'s instead, that many positions (one
    row a source, caches of 7 + ``queries``); ``joined``: :class:`_Joined`'s, the rows of the
    last source joined at slot 3."""
    n, g, s, t, length = 3, 2 if not queries else 1, 5, 4, 7 + queries
    src = torch.full((n + 1, s), model.special_ids.pad + 1)  # no padding
    state = _start_state(model, model.encode(src), length - 1)
    state.reorder(torch.arange(n + 1).repeat_interleave(g), torch.arange(n + 1))
    state.reorder(torch.arange(n * g), torch.arange(n))
    keep = torch.ones((n, 1, 1, s), dtype=torch.bool)
    first = (torch.tensor([0, 0, 3]).repeat_interleave(g),) if joined else ()
    return (
        torch.zeros((n, queries or g), dtype=torch.long),
        torch.empty(t + 1, 0),
        [_dense(layer.own.k) for layer in state.layers],
        [_dense(layer.own.v) for layer in state.layers],
        [_dense(layer.own.origin) for layer in state.layers],
        [_dense(layer.source.k) for layer in state.layers],
        [_dense(layer.source.v) for layer in state.layers],
        keep,
        *first,
    )


def _export(
    model: nn.Module, linears: list[OpaqueLinear], kind: str = "step"
) -> torch.export.ExportedProgram:
    """The step (a :data:`GRAPHS` kind) as one exported graph, dynamic in every size: N, G (1
    to :data:`~mtkit.model.layers.COMPILED_QUERIES`), S, L and t (1 to max_positions - 1; at 0
    the cache's one position makes its strides another case). ``steps``: :class:`_Steps`, Q
    positions (2 to COMPILED_QUERIES) in G's place; ``joined``: each row's first slot too."""
    if kind == "encode":
        return _export_encoder(model, linears)
    steps = kind == "steps"
    n, g, s, length = Dim("N", min=1), Dim("G", min=1, max=COMPILED_QUERIES), Dim("S"), Dim("L")
    position = Dim("T", min=2, max=model.cfg.max_positions)
    example = _example(model, 3 if steps else 0, kind == "joined")
    rows, layers = Dim("R", min=1), len(example[2])  # state layers (shared layers: several)
    if steps:  # one row a source; at least 2 positions after the one cached, within the model's
        g, rows = Dim("Q", min=2, max=COMPILED_QUERIES), n
        position, length = Dim("T", min=2, max=model.cfg.max_positions - 1), Dim("L", min=3)
    buffer_rows = Dim("P", min=1)
    shapes = (
        {0: n, 1: g},
        {0: position},
        [{0: buffer_rows, 2: length}] * layers,
        [{0: buffer_rows, 2: length}] * layers,
        [{0: rows, 1: length}] * layers,
        [{0: n, 2: s}] * layers,
        [{0: n, 2: s}] * layers,
        {0: n, 3: s},
        *([{0: rows}] if kind == "joined" else []),
    )
    with running(linears), torch.inference_mode(False), torch.no_grad():
        program = torch.export.export(
            GRAPHS[kind](model), example, dynamic_shapes=shapes, strict=False
        )
    lifted = program.graph_signature.inputs_to_lifted_tensor_constants
    if lifted:
        made = ", ".join(lifted.values())
        raise MtkitError(
            f"--compile: this model's step creates tensors of its own ({made}); "
            "translate without --compile"
        )
    return program


def _export_encoder(model: nn.Module, linears: list[OpaqueLinear]) -> torch.export.ExportedProgram:
    """The encoder (:class:`_Encode`) as one exported graph, dynamic in B and S (1 to
    max_positions); traced over 3 sources of 5 pieces, one of them padded."""
    src = torch.full((3, 5), model.special_ids.pad + 1)
    src[1, 3:] = model.special_ids.pad
    rows, length = Dim("B", min=1), Dim("S", min=1, max=model.cfg.max_positions)
    with running(linears), torch.inference_mode(False), torch.no_grad():
        return torch.export.export(
            _Encode(model), (src,), dynamic_shapes=({0: rows, 1: length},), strict=False
        )


def _build(model: nn.Module, linears: list[OpaqueLinear], path: Path, kind: str = "step") -> None:
    """AOTInductor's library of the step at ``path`` (written whole, then renamed), without
    the weights. A folder that cannot be written, or a compiler that fails (none installed,
    a full disk), is refused in one line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MtkitError(
            f"--compile: cannot keep compiled steps in {path.parent} ({e}); set "
            "MTKIT_COMPILED_DIR to a writable folder"
        ) from None
    program = _export(model, linears, kind)
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial.pt2")
    try:
        with running(linears), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecations, inside
            torch._inductor.aoti_compile_and_package(
                program,
                package_path=str(partial),
                inductor_configs={"aot_inductor.package_constants_in_so": False},
            )
        os.replace(partial, path)
    except Exception as e:  # noqa: BLE001 - the compiler's failures, in one line
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MtkitError(
            f"--compile: compiling the decoding step into {path} failed "
            f"({reason}); translate without --compile"
        ) from None
    finally:
        partial.unlink(missing_ok=True)


def _load(step: nn.Module, path: Path) -> Callable[..., Tensor]:
    """The library at ``path``, reading its weights from ``step``'s model: a function of the
    graph module's inputs, its output (or outputs). (The package's loader itself:
    ``torch._inductor``'s wrapper imports the compiler, ~2 s.)"""
    try:
        loader = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, -1)
    except Exception as e:  # noqa: BLE001 - any failure to load is the file's
        raise MtkitError(
            f"{path}: not a loadable compiled step ({e}); delete it and run again"
        ) from None
    weights = {
        name: functools.reduce(getattr, name.split("."), step)
        for name in loader.get_constant_fqns()
    }
    loader.load_constants(weights, False, True, True)  # not buffers; check all; user's

    def run(*inputs: list[Tensor] | Tensor) -> Tensor | tuple[Tensor, ...]:
        # a step's: keys, values, origins, source keys and values are lists
        flat = [x for part in inputs for x in (part if isinstance(part, list) else [part])]
        outputs = loader.run(flat)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    return run


class CompiledStep:
    """``decode_step(tokens, state)`` of one model as a compiled graph over the state's
    tensors; the state's Python-side lengths advance as the eager step advances them.
    :meth:`steps`: several positions at once, by a second graph, built on its first use."""

    def __init__(self, model: nn.Module, build: str = "aoti") -> None:
        if build not in ("aoti", "export"):
            raise ValueError(f"build must be aoti or export, got {build!r}")
        self.model, self.build = model, build
        self.linears = [m for m in model.modules() if isinstance(m, OpaqueLinear)]
        for slot, layer in enumerate(self.linears):
            layer.slot = slot
        self.handle = bind(self.linears, cache_dir())  # the C++ kernel's number for these layers
        if self.handle >= 0:
            weakref.finalize(self, linear_kernel.release, self.handle)
        self.path = cache_dir() / f"step-{_key(model, self.linears)}.pt2"
        self.graph = self._graph("step")
        self.multi: Callable[..., Tensor] | None = None  # :meth:`steps`' graph, when first used
        self.joined: Callable[..., Tensor] | None = None  # a joined decode's, when first used
        self.encoder: Callable[..., tuple[Tensor, Tensor]] | None = None  # prepare_joins'

    def _graph(self, kind: str) -> Callable[..., Tensor]:
        """The graph of ``kind`` (a :data:`GRAPHS` key), from the cache or built into it."""
        if self.build == "export":
            return _export(self.model, self.linears, kind).module()
        path = self.path if kind == "step" else self.path.with_name(f"{kind}-{self.path.name[5:]}")
        if not path.exists():
            _build(self.model, self.linears, path, kind)
        return _load(GRAPHS[kind](self.model), path)

    def prepare_joins(self) -> None:
        """Build (or load) now what a scheduling engine's rows use: the joined decode's graph
        (a server's first request whose rows join another's would wait for it) and the
        encoder's, through which :meth:`encode` goes from now on."""
        if self.joined is None:
            self.joined = self._graph("joined")
        self.prepare_encoder()

    def prepare_encoder(self) -> None:
        """Build (or load) the encoder's graph: :meth:`encode` goes through it from now on."""
        if self.encoder is None:
            self.encoder = self._graph("encode")

    def encode(self, src: Tensor) -> EncoderOut:
        """The model's ``encode``: through the encoder's graph once :meth:`prepare_joins`
        built it (a mask of None where nothing is padded, as eagerly), else eagerly."""
        if self.encoder is None or src.shape[1] > self.model.cfg.max_positions:
            return Transformer.encode(self.model, src)  # (past the positions: its error)
        with running(self.linears, self.handle):
            memory, keep = self.encoder(_dense(src))
        return EncoderOut(memory, None if bool(keep.all()) else keep)

    def __call__(self, tokens: Tensor, state: DecoderState) -> Tensor:
        if not self._compiled(state, 1) or state.group > COMPILED_QUERIES:
            # alignments, the first step, wide beams, past the positions (its error)
            return Transformer.decode_step(self.model, tokens, state)
        # the tokens: the search's last column of its history, a strided view
        if state.first is None:
            return self._run(self.graph, _dense(tokens), state, 1)
        if self.joined is None:
            self.joined = self._graph("joined")
        return self._run(self.joined, _dense(tokens), state, 1, (_dense(state.first),))

    def steps(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """``decode_steps``: tokens (R, n), n > 1, one row per source (a greedy search's
        rows, speculative decoding's check of a draft's proposals); logits (R, n, V)."""
        n = tokens.shape[1]
        eager = state.group != 1 or n > COMPILED_QUERIES or state.first is not None
        if eager or not self._compiled(state, n):
            return Transformer.decode_steps(self.model, tokens, state)
        if self.multi is None:
            self.multi = self._graph("steps")
        return self._run(self.multi, _dense(tokens), state, n)

    def _compiled(self, state: DecoderState, n: int) -> bool:
        """Whether the graph takes ``n`` positions from ``state``: not the first step, within
        the positions, no recorded attention, the caches its pointer caches."""
        t = state.offset
        return (
            state.attention is None
            and 0 < t
            and t + n <= self.model.cfg.max_positions
            and all(
                isinstance(layer.own, PointerCache) and layer.own.length == t
                for layer in state.layers
            )
        )

    def _run(
        self,
        graph: Callable[..., Tensor],
        tokens: Tensor,
        state: DecoderState,
        n: int,
        extra: tuple[Tensor, ...] = (),
    ) -> Tensor:
        """``graph`` on the state's tensors, every input in the standard strides (the source
        keys/values and mask made so once per batch, in the state); the lengths advance."""
        caches, t = [layer.own for layer in state.layers], state.offset
        for layer in state.layers:
            layer.source.k, layer.source.v = _dense(layer.source.k), _dense(layer.source.v)
        if state.src_keep is None:  # no padding: a mask that keeps everything
            rows, _, s, _ = state.layers[0].source.k.shape
            state.src_keep = torch.ones((rows, 1, 1, s), dtype=torch.bool, device=tokens.device)
        state.src_keep = keep = _dense(state.src_keep)
        shaped = tokens.view(keep.shape[0], state.group) if n == 1 else tokens
        with running(self.linears, self.handle):
            logits = graph(
                shaped,
                torch.empty(t + 1, 0),
                [c.k for c in caches],
                [c.v for c in caches],
                [c.origin for c in caches],
                [layer.source.k for layer in state.layers],
                [layer.source.v for layer in state.layers],
                keep,
                *extra,
            )
        for cache in caches:
            cache.length = t + n
        state.offset = t + n
        return logits
