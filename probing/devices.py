"""Where torch work runs: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``; by default CUDA when present, else CPU.

Encoders' fingerprints and store keys never depend on the device: results on every device agree within the
tolerance DESIGN.md documents, and a store extracted on one is served on any other.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from probing.errors import InputError

if TYPE_CHECKING:
    import torch

DEVICE_HELP = "cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)"
_PATTERN = re.compile(r"cpu|cuda(:\d+)?|mps")
_default: list[str | None] = [None]  # set by use_device


class DeviceError(InputError):
    """A device that is not a device name, or that this machine does not have."""


def check_device_name(device: str) -> str:
    """``device`` if it is spelled like a device (no torch import); DeviceError otherwise."""
    if not isinstance(device, str) or not _PATTERN.fullmatch(device):
        raise DeviceError(f"device must be one of {DEVICE_HELP}; got {device!r}")
    return device


def resolve_device(device: str | None = None) -> str:
    """The device to run on, as a canonical string: ``device`` checked against this machine, or for
    None/``"auto"`` CUDA device 0 when CUDA is available, else ``"cpu"``.

    DeviceError names the device when it is misspelt or absent (``"cuda"`` without CUDA, ``"cuda:3"`` on a
    machine with two GPUs, ``"mps"`` off Apple silicon).
    """
    import torch

    if device is None or device == "auto":
        device = _default[0]
    if device is None or device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    check_device_name(device)
    if device == "cpu":
        return device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(f"device {device!r} was requested, but torch finds no CUDA device on this machine")
        index = int(device.partition(":")[2] or 0)
        count = torch.cuda.device_count()
        if index >= count:
            raise DeviceError(f"device {device!r} was requested, but this machine has {count} CUDA device(s)")
        return f"cuda:{index}"
    if not torch.backends.mps.is_available():
        raise DeviceError(f"device {device!r} was requested, but torch finds no MPS (Apple GPU) device")
    return device


@contextlib.contextmanager
def use_device(device: str | None) -> Iterator[None]:
    """Within the block, ``device=None`` means ``device`` (checked for its spelling now); the runner uses it to
    put every probe of ``probing run --device`` on one device without the device entering any cache key."""
    previous = _default[0]
    _default[0] = None if device is None else check_device_name(device)
    try:
        yield
    finally:
        _default[0] = previous


def torch_device(device: str | None = None) -> torch.device:
    """:func:`resolve_device` as a ``torch.device``."""
    import torch

    return torch.device(resolve_device(device))


def describe(device: str) -> str:
    """A resolved device with its hardware name, for provenance (``"cuda:0 (NVIDIA H200)"``, ``"cpu"``)."""
    import torch

    if device.startswith("cuda"):
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return device
