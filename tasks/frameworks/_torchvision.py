"""torchvision next to the CPU wheel of torch.

Every torchvision wheel the package registries offer for this torch is a CUDA build. Next to the CPU
torch its compiled extension (`_C.so`: detection operators such as nms and roi_align) cannot load.
torchvision guards every operator registration on that extension, except two: its import declares a
fake (shape-only) implementation of `torchvision::nms` and `torchvision::qnms` unconditionally, and
fails with "operator torchvision::nms does not exist".

The project only needs torchvision's architectures and transforms, which are plain Python on top of
torch. So where that exact failure happens, the two operators' schemas are declared here (their
signatures as torchvision's C++ declares them) and the import is retried. The operators have no
kernel then: calling `torchvision.ops.nms` raises torchvision's own "Couldn't load custom C++ ops"
error rather than computing anything wrong. Where the extension loads (a GPU worker with a matching
CUDA pair), the first import succeeds and nothing is declared, so nothing can clash with torchvision's
own definitions.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

# The declared schemas live as long as this library object: a module global keeps them alive.
_DECLARED: list[Any] = []

# torchvision's `_meta_registrations.py` registers fake implementations of these two without checking
# that its extension loaded; the schemas are those of torchvision/csrc/ops/nms.cpp and qnms.
_UNGUARDED_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_MISSING_OPERATOR = "operator torchvision::nms does not exist"


def import_torchvision() -> ModuleType:
    """torchvision, imported; next to a CPU torch whose extension it cannot load, with the two
    unguarded operator schemas declared first (see the module's docstring)."""
    # torch and torchvision are imported here, not at the top: they cost seconds and GBs of address
    # space, and only the image adapter's child process needs them.
    try:
        import torchvision
    except RuntimeError as exc:
        if _MISSING_OPERATOR not in str(exc):
            raise
        _declare_unguarded_operators()
        import torchvision
    return torchvision


def extension_loaded() -> bool:
    """Whether torchvision's compiled operators are usable (False on the CPU torch here)."""
    torchvision = import_torchvision()
    return bool(torchvision.extension._has_ops())


def _declare_unguarded_operators() -> None:
    import torch  # the caller's lazy import (see import_torchvision)

    # The failed import left half-initialised torchvision modules behind; the retry must start clean.
    for name in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
        del sys.modules[name]
    if _DECLARED:
        return
    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _UNGUARDED_SCHEMAS:
        library.define(schema)
    _DECLARED.append(library)
