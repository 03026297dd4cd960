"""The 4-bit copy's VNNI kernel (``engine.q4_vnni``): its layout holds every code where the kernel reads it, and
it computes the Q4_1 dot product over activations rounded to int8 twice per group of 32 (the rounding and what it
left; the minimum's term exact) for one and several rows, in float32 and bfloat16; the kernel choice names what it
chose."""

import pytest
import torch

from explorer.engine import lowbit, q4_vnni

MISSING = q4_vnni.load()
needs_kernel = pytest.mark.skipif(MISSING is not None, reason=f"no VNNI kernel here: {MISSING}")


def blocks(o: int, i: int, seed: int = 0) -> lowbit.Int4Blocks:
    generator = torch.Generator().manual_seed(seed)
    return lowbit.Int4Blocks.rounded(torch.randn(o, i, generator=generator) * i ** -0.5)


def test_the_layout_puts_each_code_in_its_lane_and_nibble():
    b = blocks(48, 96)
    codes, dm = q4_vnni.pack(b.codes, b.scale, b.minimum)
    assert codes.shape == (3, 12, 64) and codes.dtype == torch.uint8
    assert dm.shape == (3, 3, 2, 16) and dm.dtype == torch.float16
    lanes = codes.view(3, 12, 16, 4)  # (row block, 8-input chunk, row in block, byte)
    for row, column in ((0, 0), (17, 5), (47, 95), (30, 44), (5, 71)):
        chunk, offset = divmod(column, 8)
        byte = int(lanes[row // 16, chunk, row % 16, offset % 4])
        code = byte & 0x0F if offset < 4 else byte >> 4
        assert code == int(b.codes[row, column]), (row, column)
        assert float(dm[row // 16, column // 32, 0, row % 16]) == float(b.scale[row, column // 32].half())
        assert float(dm[row // 16, column // 32, 1, row % 16]) == float(b.minimum[row, column // 32].half())


def q8_reference(x: torch.Tensor, b: lowbit.Int4Blocks) -> torch.Tensor:
    """Σ_g d·(s1·Σ q·y1 + s2·Σ q·y2) + m·Σ x in float64: per group of 32, y1 = round(x / s1),
    s1 = max|x| / 127, and y2 the same rounding of what y1 left, x − s1·y1 (the kernel's ``quantise``, in
    float32 as it does it)."""
    r, i = x.shape
    xg = x.float().view(r, i // 32, 32)

    def rounded(v):
        s = v.abs().amax(-1, keepdim=True) / 127
        return torch.where(s > 0, torch.round(v * torch.where(s > 0, 127 / v.abs().amax(-1, keepdim=True), 0)), 0), s

    y1, s1 = rounded(xg)
    y2, s2 = rounded(xg - s1 * y1)
    q = b.codes.double().view(-1, i // 32, 32)
    d, m = b.scale.half().double(), b.minimum.half().double()  # the kernel reads them in float16
    dots = (torch.einsum("rgj,ogj->rog", y1.double(), q) * s1[:, None, :, 0].double()
            + torch.einsum("rgj,ogj->rog", y2.double(), q) * s2[:, None, :, 0].double())  # (R, O, G)
    return (dots * d[None] + m[None] * xg.double().sum(-1)[:, None]).sum(-1)


@needs_kernel
@pytest.mark.parametrize("rows", [1, 5, 17])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_kernel_computes_the_q4_times_q8_dot_product(rows, dtype):
    b = blocks(160, 192, seed=rows)
    x = torch.randn(rows, 192, generator=torch.Generator().manual_seed(7)).to(dtype)
    got = lowbit.multiply("int4x8", x, q4_vnni.pack(b.codes, b.scale, b.minimum))
    assert got.shape == (rows, 160) and got.dtype == dtype
    expected = q8_reference(x.float(), b)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2  # bf16: the output's own rounding
    assert float((got.double() - expected).abs().max()) <= tolerance * float(expected.abs().max())
    # and it is the product of the weights themselves (d and m as the kernel keeps them, in float16), up to the
    # activations' rounding
    halves = lowbit.Int4Blocks(b.codes, b.scale.half().float(), b.minimum.half().float())
    dense = x.double() @ halves.dense().double().T
    assert float((got.double() - dense).norm() / dense.norm()) < (5e-5 if dtype == torch.float32 else 5e-3)


@needs_kernel
def test_a_linear_on_the_kernel_takes_bfloat16_and_gives_it_back():
    b = blocks(64, 128)
    product = lowbit.LowBitLinear("int4x8", lowbit.pack_int4x8(b), 64, 128, None, torch.bfloat16, "")
    x = torch.randn(2, 3, 128)
    out = product(x)
    assert out.shape == (2, 3, 64) and out.dtype == torch.bfloat16
    assert float((out.float() - x @ b.dense().T).norm() / (x @ b.dense().T).norm()) < 5e-3  # bf16's own rounding
    assert product.extra_bytes() == 64 * 128 // 2 + 64 * 4 * 2 * 2  # half a byte a code; d and m in float16 a group


def test_without_the_kernel_the_choice_says_why_and_keeps_its_own_record(monkeypatch):
    key = ("int4", "cpu", torch.bfloat16)
    kept_with = lowbit._record_path(key)
    monkeypatch.setenv("EXPLORER_Q4_VNNI", "0")
    try:
        assert q4_vnni.load() == "EXPLORER_Q4_VNNI=0"
        with pytest.raises(RuntimeError, match="EXPLORER_Q4_VNNI=0"):
            lowbit.pack_int4x8(blocks(16, 32))
        assert lowbit._candidates("int4", "cpu") == ("int4",)
        # a process without it neither reads nor overwrites the choice made where it competed
        assert (lowbit._record_path(key) == kept_with) == (MISSING is not None)
    finally:
        monkeypatch.delenv("EXPLORER_Q4_VNNI")
    assert q4_vnni.load() == MISSING  # back on, without loading it twice


def test_the_int4_choice_names_its_kernel():
    family, why = lowbit.choose("int4", torch.device("cpu"), torch.bfloat16, 576, 576)
    assert family in ("int4x8", "int4", "dense")
    assert why.startswith(tuple(lowbit.KERNEL_WORDS.values()) + ("de-quantised",))
    if MISSING is not None:
        assert family != "int4x8"


@needs_kernel
def test_threads_asking_at_once_load_it_once():
    """Visitors' first runs can build copies on several threads at once: each sees the kernel, and the op is
    registered once (a second registration of its namespace raises)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import threading\nfrom explorer.engine import q4_vnni\nseen = []\n"
            "threads = [threading.Thread(target=lambda: seen.append(q4_vnni.load())) for _ in range(4)]\n"
            "[t.start() for t in threads]; [t.join() for t in threads]\nprint(seen)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0 and done.stdout.strip() == "[None, None, None, None]", done.stderr[-500:]
