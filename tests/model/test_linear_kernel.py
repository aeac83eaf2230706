"""``mtkit::linear``'s C++ kernel: built once into the cache, bound per model, activated per
thread; where it cannot be built, the Python kernel serves with the same output.
(That it computes exactly what each prepared layer computes: test_compiled.py's
test_opaque_linear_is_the_layer_it_replaces.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mtkit.model import linear_kernel, opaque

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The kernel loaded in this process (built into a folder of this module's, unless an
    earlier test loaded it already); its folder."""
    folder = tmp_path_factory.mktemp("kernel")
    why = linear_kernel.load(folder)
    assert why == "", f"the C++ kernel could not be built here: {why}"
    return folder


def test_the_library_is_named_by_its_source_and_torch(monkeypatch, tmp_path: Path) -> None:
    path = linear_kernel.library_path(tmp_path)
    assert path.parent == tmp_path and path.suffix == ".so"
    monkeypatch.setattr(linear_kernel, "SOURCE", linear_kernel.SOURCE + "// changed\n")
    changed = linear_kernel.library_path(tmp_path)
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert len({path, changed, linear_kernel.library_path(tmp_path)}) == 3


def test_a_kernel_that_cannot_be_built_says_why_and_leaves_nothing(monkeypatch, tmp_path) -> None:
    def fails(*_, **__):
        raise RuntimeError("Ninja is required to load C++ extensions\nmore")

    monkeypatch.setattr(linear_kernel, "_LOADED", [])
    monkeypatch.setattr("torch.utils.cpp_extension.load", fails)
    assert linear_kernel.load(tmp_path) == "Ninja is required to load C++ extensions"
    assert list(tmp_path.iterdir()) == []
    file = tmp_path / "a file"
    file.write_text("")
    assert "Not a directory" in linear_kernel.load(file / "kernels")


def test_a_step_calls_only_layers_bound_and_active(built: Path) -> None:
    x = torch.randn(2, 4)
    with pytest.raises(RuntimeError, match="outside a bound model's step"):
        torch.ops.mtkit.linear(x, 0)
    with pytest.raises(RuntimeError, match="no model bound as 123456"):
        linear_kernel.activate(123456)
    layer = opaque.OpaqueLinear("fp32", *_packed(torch.randn(3, 4), torch.randn(3)), 3)
    handle = opaque.bind([layer], built)
    assert handle >= 0
    before = linear_kernel.activate(handle)
    try:
        assert torch.equal(torch.ops.mtkit.linear(x, 0), layer.run(x))
        with pytest.raises(RuntimeError, match="no layer 1"):
            torch.ops.mtkit.linear(x, 1)
    finally:
        assert linear_kernel.activate(before) == handle  # the one active until then
    linear_kernel.release(handle)
    with pytest.raises(RuntimeError, match=f"no model bound as {handle}"):
        linear_kernel.activate(handle)


def test_bf16_rows_go_in_the_buckets_the_eager_layer_uses(built: Path) -> None:
    """A bf16 layer of 1,024 inputs, whose oneDNN kernel changes with the row count: the C++
    kernel pads each count to the bucket the eager layer pads it to, so their rows are equal
    (each count's unpadded rows differ for some of them)."""
    from mtkit.model.packed import onednn_available

    if not onednn_available(torch.bfloat16):
        pytest.skip("no oneDNN bf16 kernels in this build")
    torch.manual_seed(0)
    layer = opaque.OpaqueLinear("bf16", *_packed(torch.randn(256, 1024), None, torch.bfloat16), 256)
    handle = opaque.bind([layer], built)
    try:
        with opaque.running([layer], handle):
            for rows in (1, 9, 33, 34, 35, 36, 65, 241, 257, 300):
                x = torch.randn(rows, 1024)
                assert torch.equal(torch.ops.mtkit.linear(x.bfloat16(), 0).float(), layer.run(x))
    finally:
        linear_kernel.release(handle)


def _packed(
    weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor | None]:
    from mtkit.model.packed import PackedLinear

    layer = PackedLinear(weight, bias, dtype)
    return layer.packed, layer.bias


FALLBACK = textwrap.dedent("""
    import torch
    from mtkit.model import linear_kernel
    linear_kernel.load = lambda folder: "no C++ compiler"
    from model_helpers import SOURCES, tiny, MODERN, hypotheses, BEAM
    from mtkit.model.compiled import compile_step
    from mtkit.model.inference import prepare_for_inference
    cpu = torch.device("cpu")
    torch.set_num_threads(1)
    eager = prepare_for_inference(tiny(**MODERN), cpu)  # linear layers packed for oneDNN
    model = compile_step(prepare_for_inference(tiny(**MODERN), cpu), cpu, build="export")
    assert model.decode_step.handle == -1 and model.decode_step.linears
    assert hypotheses([model], BEAM) == hypotheses([eager], BEAM)
    print("same output")
""")


def test_without_the_cpp_kernel_the_python_one_serves_with_one_warning(tmp_path: Path) -> None:
    tests = Path(__file__).parent
    env = {
        "PYTHONPATH": f"{tests.parent.parent}:{tests.parent}:{tests}",
        "MTKIT_COMPILED_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "same output"
    warnings = [line for line in done.stderr.splitlines() if "mtkit: warning" in line]
    assert warnings == [
        "mtkit: warning: --compile: the C++ kernel of the compiled step's linear "
        "layers could not be built (no C++ compiler); a slower Python one "
        "serves"
    ]
