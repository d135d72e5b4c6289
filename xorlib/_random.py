"""Reproducible randomness: derived seeds, random bytes, and bytes unpacked to signs.

Every random draw of the package starts from a user's ``seed`` and a label
naming its purpose ("codes", "pair", "init", "data"), hashed into an
independent 63-bit seed, so that changing one draw never shifts another. Bits
are drawn on the CPU, 64 at a time, with torch's Mersenne Twister, and only
then moved to the requested device: the same seed gives the same bits on every
device and thread count.
"""

from __future__ import annotations

import hashlib

import torch

#: Row ``v`` holds the eight bits of the byte ``v``, least significant first, as signs: bit 1 is ``-1``.
BYTE_SIGNS = torch.tensor([[-1.0 if (v >> k) & 1 else 1.0 for k in range(8)] for v in range(256)])
#: Row ``v`` holds the eight bits of the byte ``v`` as 0/1.
BYTE_BITS = (1.0 - BYTE_SIGNS) / 2


def derive_seed(seed: int, *labels: object) -> int:
    """An independent 63-bit seed for the purpose named by ``labels`` (hash of ``seed`` and ``labels``)."""
    text = "/".join([str(seed), *map(str, labels)]).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def generator(seed: int, *labels: object) -> torch.Generator:
    """A CPU generator seeded with :func:`derive_seed`."""
    gen = torch.Generator()
    gen.manual_seed(derive_seed(seed, *labels))
    return gen


def random_bytes(gen: torch.Generator, count: int) -> torch.Tensor:
    """``count`` uniform random bytes (uint8, CPU), drawn as 64-bit words."""
    words = torch.randint(-(2**63), 2**63 - 1, ((count + 7) // 8,), generator=gen, dtype=torch.int64)
    return words.view(torch.uint8)[:count]


def bytes_to_signs(packed: torch.Tensor, bits: int, dtype: torch.dtype) -> torch.Tensor:
    r"""Unpack ``(..., B)`` bytes into ``(..., bits)`` signs :math:`\pm1` of ``dtype`` (bit 1 is :math:`-1`)."""
    table = BYTE_SIGNS.to(device=packed.device, dtype=dtype)
    signs = table[packed.long()]
    return signs.reshape(*packed.shape[:-1], packed.shape[-1] * 8)[..., :bits]
