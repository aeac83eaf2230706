"""``mtkit::linear``'s CPU kernel in C++: a compiled step's prepared linear layers called
without Python in between (issue 31).

Inside a compiled step (:mod:`mtkit.model.compiled`) each linear layer whose weight is
prepared for a CPU library (packed for oneDNN, or int8 for fbgemm) is one call of the custom
operator ``mtkit::linear(x, slot)``. Its Python kernel costs ~35-100 us a call (the
interpreter's lock, argument conversion, the layer lookup), 19 calls a step in the demo model:
a quarter of a bf16 step on a CPU with AMX. This kernel does the same in C++: each model's
layers are bound once (:func:`bind`: the operator each calls, ``mkldnn::_linear_pointwise``
or ``quantized::linear_dynamic``, with its prepared arguments), a step activates its model
for its thread (:func:`activate`), and the kernel calls the layer's operator through
PyTorch's dispatcher: the very kernels the eager layers call, so the outputs are the same.

The source is built once per machine (torch's C++ extension builder: a C++ compiler and
ninja, ~10 s on 2 cores, most of it parsing the tensor's headers: not all of ATen's, which took
16 s) into the compiled-step cache and loaded from there by later runs (milliseconds). Where
it cannot be built, :func:`load` says why and the Python kernel serves (same output, slower).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import tempfile
from pathlib import Path

import torch

SOURCE = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

struct Layer {  // one prepared linear layer: its operator and the arguments after x
  std::optional<c10::OperatorHandle> op;
  std::vector<c10::IValue> args;
  bool bucketed = false;  // rows padded to mtkit.model.packed.bucketed's count
};
using Model = std::vector<Layer>;

std::mutex models_lock;
std::unordered_map<int64_t, Model> models;  // by handle; nodes stay put while others come
thread_local int64_t active_handle = -1;
thread_local Model* active = nullptr;

Model& model_of(int64_t handle) {  // under models_lock
  auto found = models.find(handle);
  TORCH_CHECK(found != models.end(), "mtkit::linear: no model bound as ", handle);
  return found->second;
}

void bind_layer(int64_t handle, int64_t slot, const char* name, std::vector<c10::IValue> args,
                bool bucketed = false) {
  std::lock_guard<std::mutex> guard(models_lock);
  Model& model = models[handle];
  if (model.size() <= static_cast<size_t>(slot)) model.resize(slot + 1);
  model[slot].op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  model[slot].args = std::move(args);
  model[slot].bucketed = bucketed;
}

void bind_packed(int64_t handle, int64_t slot, at::Tensor weight, std::optional<at::Tensor> bias,
                 bool bucketed) {
  std::vector<c10::IValue> args{weight, bias, std::string("none"),
                                c10::List<std::optional<at::Scalar>>(), std::string("")};
  bind_layer(handle, slot, "mkldnn::_linear_pointwise", std::move(args), bucketed);
}

int64_t bucket(int64_t rows) {  // as mtkit.model.packed.bucketed
  int64_t step = rows <= 64 ? 8 : rows <= 256 ? 16 : 64;
  return (rows + step - 1) / step * step;
}

void bind_int8(int64_t handle, int64_t slot, c10::IValue packed) {
  bind_layer(handle, slot, "quantized::linear_dynamic", {std::move(packed), true});
}

int64_t activate(int64_t handle) {  // returns the handle active before
  int64_t before = active_handle;
  if (handle < 0) {
    active = nullptr;
  } else {
    std::lock_guard<std::mutex> guard(models_lock);
    active = &model_of(handle);
  }
  active_handle = handle;
  return before;
}

void release(int64_t handle) {
  std::lock_guard<std::mutex> guard(models_lock);
  models.erase(handle);
}

at::Tensor linear(const at::Tensor& x, int64_t slot) {
  TORCH_CHECK(active != nullptr, "mtkit::linear called outside a bound model's step");
  TORCH_CHECK(slot >= 0 && static_cast<size_t>(slot) < active->size() && (*active)[slot].op,
              "mtkit::linear: no layer ", slot);
  const Layer& layer = (*active)[slot];
  int64_t width = x.dim() ? x.size(-1) : 0;
  int64_t rows = width ? x.numel() / width : 0;
  int64_t padded = layer.bucketed ? bucket(rows) : rows;
  at::Tensor input = x;
  if (padded != rows) {  // zero rows after x's, flattened
    input = at::zeros({padded, width}, x.options());
    input.narrow(0, 0, rows).copy_(x.reshape({rows, width}));
  }
  torch::jit::Stack stack;
  stack.reserve(layer.args.size() + 1);
  stack.emplace_back(input);
  stack.insert(stack.end(), layer.args.begin(), layer.args.end());
  layer.op->callBoxed(&stack);
  at::Tensor y = stack[0].toTensor();
  if (padded == rows) return y;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(y.size(-1));
  return y.narrow(0, 0, rows).view(shape);
}

}  // namespace

TORCH_LIBRARY(mtkit_kernel, m) {
  m.def("bind_packed(int handle, int slot, Tensor weight, Tensor? bias, bool bucketed) -> ()",
        bind_packed);
  m.def("bind_int8(int handle, int slot, Any packed) -> ()", bind_int8);
  m.def("activate(int handle) -> int", activate);
  m.def("release(int handle) -> ()", release);
}

TORCH_LIBRARY_IMPL(mtkit, CPU, m) { m.impl("linear", linear); }
"""

_LOADED: list[bool] = []  # [True] once the library is loaded in this process


def library_path(folder: Path) -> Path:
    """Where the kernel's shared library is kept in ``folder``: named by a hash of its source,
    torch's version and the machine, so a change to any of them builds another."""
    key = f"{SOURCE}\0{torch.__version__}\0{platform.machine()}\0{platform.python_version()}"
    return folder / f"linear-kernel-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"


def load(folder: Path) -> str:
    """Load the C++ kernel (built into ``folder`` first if it is not there yet). Returns ""
    once it serves ``mtkit::linear`` in this process, else why not (nothing registered: the
    caller registers the Python kernel). ``mtkit::linear`` must be defined first."""
    if _LOADED:
        return ""
    path = library_path(folder)
    try:
        if path.exists():
            torch.ops.load_library(str(path))
        else:
            _build(path)  # and loaded
    except Exception as e:  # noqa: BLE001 - no compiler, no ninja, a full disk: say why
        text = str(e).strip()
        return text.splitlines()[0] if text else type(e).__name__
    _LOADED.append(True)
    return ""


def _build(path: Path) -> None:
    """Compile :data:`SOURCE` and load it; kept at ``path`` (built in a folder of its own,
    then renamed: two processes building at once each finish, one library stays)."""
    from torch.utils.cpp_extension import load

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".linear-kernel-") as work:
        source = Path(work) / "linear_kernel.cpp"
        source.write_text(SOURCE)
        name = f"mtkit_linear_kernel_{os.getpid()}"
        built = load(
            name,
            [str(source)],
            extra_cflags=["-O2"],
            build_directory=work,
            is_python_module=False,
            verbose=False,
        )
        partial = path.with_name(f"{path.stem}.{os.getpid()}.partial.so")
        shutil.copyfile(built if isinstance(built, str) else Path(work) / f"{name}.so", partial)
        os.replace(partial, path)


def bind(handle: int, slot: int, kind: str, weight: object, bias: torch.Tensor | None) -> None:
    """Bind layer ``slot`` of model ``handle``: an int8 layer's fbgemm parameters, or a
    oneDNN-packed weight and its bias (fp32, or bf16, whose input the graph has rounded and
    whose rows are padded as :func:`~mtkit.model.packed.bucketed` says)."""
    if kind == "int8":
        torch.ops.mtkit_kernel.bind_int8(handle, slot, weight)
    else:
        torch.ops.mtkit_kernel.bind_packed(handle, slot, weight, bias, kind == "bf16")


def activate(handle: int) -> int:
    """Make model ``handle`` the one whose layers ``mtkit::linear`` calls in this thread (-1:
    none); returns the handle active before."""
    return torch.ops.mtkit_kernel.activate(handle)


def release(handle: int) -> None:
    """Forget model ``handle``'s layers (their tensors freed with the model)."""
    torch.ops.mtkit_kernel.release(handle)
