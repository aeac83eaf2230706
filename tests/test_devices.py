"""mtkit.devices: device names, and the attention backends kept on CUDA."""

import pytest
import torch

from mtkit.devices import DeviceName, parse_device, steady_attention
from mtkit.errors import MtkitError


@pytest.fixture
def cudnn_sdp():
    """The process-wide cuDNN attention switch, restored after the test."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def test_names():
    assert parse_device("cuda:3") == DeviceName("cuda", 3)
    assert parse_device(" auto ") == DeviceName("auto", None)
    with pytest.raises(MtkitError, match="--dtype-device: unknown device 'gpu'"):
        parse_device("gpu", "--dtype-device")


def test_cuda_turns_cudnn_attention_off(cudnn_sdp):
    steady_attention(torch.device("cuda", 0))
    assert not torch.backends.cuda.cudnn_sdp_enabled()
    # flash and memory-efficient attention stay on
    assert torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.mem_efficient_sdp_enabled()


def test_cpu_changes_nothing(cudnn_sdp):
    steady_attention(torch.device("cpu"))
    assert torch.backends.cuda.cudnn_sdp_enabled()
