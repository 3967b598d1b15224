"""Images as bytes and back: deterministic PNG encoding, decoding to uint8 arrays, content hashes.

Pillow does the work (it comes with matplotlib). A content hash is over the decoded pixels and
their shape, not the file's bytes: the same picture saved twice with other PNG settings is still
the same image, and the folds must keep both copies on one side.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable

import numpy as np

# What Pillow raises for bytes that are not a decodable image (truncated, wrong format, empty);
# its UnidentifiedImageError is an OSError.
DECODE_ERRORS = (OSError, ValueError, SyntaxError)
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def encode_png(pixels: np.ndarray) -> bytes:
    """uint8 pixels (H, W) or (H, W, C) as PNG bytes; the same pixels give the same bytes."""
    from PIL import Image  # see _pillow_is_imported_late below

    array = np.ascontiguousarray(pixels, dtype=np.uint8)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    buffer = io.BytesIO()
    # Fixed settings, no metadata: the file's bytes depend on the pixels (and zlib) only.
    Image.fromarray(array).save(buffer, format="PNG", compress_level=9, optimize=False)
    return buffer.getvalue()


def decode(data: bytes) -> np.ndarray:
    """PNG/JPEG/... bytes as uint8 pixels (H, W, C); one of DECODE_ERRORS when they are no image."""
    if not data:
        raise ValueError("the file is empty (0 bytes)")
    from PIL import Image  # see _pillow_is_imported_late below

    with Image.open(io.BytesIO(data)) as opened:
        opened.load()
        image: Image.Image = opened
        if image.mode not in ("L", "RGB", "RGBA"):
            image = image.convert("RGBA" if "A" in image.mode else "RGB" if image.mode != "1" else "L")
        array = np.asarray(image, dtype=np.uint8)
    return array[:, :, None] if array.ndim == 2 else array


def content_hash(pixels: np.ndarray) -> str:
    """The image's identity: a hash of its shape and pixels."""
    digest = hashlib.blake2b(repr(pixels.shape).encode("ascii"), digest_size=16)
    digest.update(np.ascontiguousarray(pixels).tobytes())
    return digest.hexdigest()


def content_hashes(images: Iterable[bytes]) -> list[str]:
    """One content hash per image; an image that does not decode is hashed by its bytes (the gate
    reports it as undecodable; the folds still need an identity for it)."""
    hashes = []
    for data in images:
        try:
            hashes.append(content_hash(decode(data)))
        except DECODE_ERRORS:
            hashes.append("bytes:" + hashlib.blake2b(bytes(data or b""), digest_size=16).hexdigest())
    return hashes


# _pillow_is_imported_late: Pillow is imported inside encode_png and decode, not at the top. A worker
# in a framework environment (.venvs/NAME-VERSION, which holds that framework's packages only) imports
# every adapter module, the image CNN's included, and this module with it; only image jobs need Pillow.
