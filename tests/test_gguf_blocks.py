"""The GGUF unpacking (``models.gguf``) on blocks built by hand, in the fast lane (#50: it was tested only on the
real model's file, under the ``model`` marker).

GGML's Q4_1 block (llama.cpp ``block_q4_1``): 32 weights along a row in 20 bytes — fp16 d, fp16 m, then 16 bytes
whose byte j holds code j in its low nibble and code j + 16 in its high one — standing for w = d·q + m. Blocks are
written here byte by byte from that layout, with codes and scales chosen to be exact in fp16, and read back both
by ``_unpack`` and through a whole GGUF file (``gguf.GGUFWriter`` → ``q4_1_blocks``). The q/k rows go through
llama.cpp's own permutation (its converter's ``LlamaModel.permute``, written out here) and must come back in the
order the loaded model has them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from explorer.models.gguf import BLOCK_BYTES, _reverse_permute, _unpack, q4_1_blocks

GROUP = 32


def q4_1_block(codes: list[int], d: float, m: float) -> bytes:
    """One Q4_1 block from its 32 codes (0–15), d and m, byte by byte as llama.cpp lays it out."""
    assert len(codes) == GROUP and all(0 <= q <= 15 for q in codes)
    nibbles = bytes(codes[j] | (codes[j + 16] << 4) for j in range(16))
    return np.float16(d).tobytes() + np.float16(m).tobytes() + nibbles


def q4_1_tensor(codes: np.ndarray, d: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(O, G·32) codes, (O, G) d and m → the tensor's raw bytes, (O, G·20) uint8."""
    rows, groups = d.shape
    raw = b"".join(q4_1_block(codes[o, g * GROUP:(g + 1) * GROUP].tolist(), d[o, g], m[o, g])
                   for o in range(rows) for g in range(groups))
    return np.frombuffer(raw, dtype=np.uint8).reshape(rows, groups * BLOCK_BYTES)


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``LlamaModel.permute``: the Hugging Face q/k rows in rotary order."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_one_block_unpacks_to_its_codes_scale_and_minimum():
    codes = list(range(16)) + list(range(15, -1, -1))  # every code, low nibbles and high nibbles different
    raw = np.frombuffer(q4_1_block(codes, 0.5, -2.0), dtype=np.uint8).reshape(1, BLOCK_BYTES)
    assert len(raw[0]) == 20 and raw[0, 4] == 0 | (15 << 4)  # byte 0 of the codes: code 0 low, code 16 high
    got_codes, d, m = _unpack(raw)
    assert got_codes.tolist() == [codes] and d.tolist() == [[0.5]] and m.tolist() == [[-2.0]]
    weights = d[:, :, None] * got_codes.reshape(1, 1, GROUP) + m[:, :, None]
    assert weights.ravel().tolist() == [0.5 * q - 2.0 for q in codes]  # w = d·q + m, exactly


def test_many_blocks_unpack_in_row_and_group_order_and_agree_with_ggufs_own_dequantiser():
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    rng = np.random.default_rng(0)
    rows, groups = 6, 3
    codes = rng.integers(0, 16, size=(rows, groups * GROUP))
    d = rng.integers(1, 64, size=(rows, groups)) / 64  # exact in fp16
    m = -rng.integers(0, 64, size=(rows, groups)) / 16
    raw = q4_1_tensor(codes, d, m)
    got_codes, got_d, got_m = _unpack(raw)
    assert np.array_equal(got_codes, codes) and np.array_equal(got_d, d) and np.array_equal(got_m, m)
    ours = np.repeat(got_d, GROUP, axis=1) * got_codes + np.repeat(got_m, GROUP, axis=1)
    theirs = dequantize(raw, GGMLQuantizationType.Q4_1)  # the gguf package's reading of the same bytes
    assert theirs.shape == (rows, groups * GROUP) and np.array_equal(ours, theirs)


@pytest.mark.parametrize("heads", [1, 3])
def test_the_q_k_un_permutation_undoes_llama_cpps_permutation(heads):
    rows = heads * 8
    w = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)  # each row its own numbers
    stored = llama_cpp_permute(w, heads)
    assert not np.array_equal(stored, w)  # the file's order is not the model's
    assert np.array_equal(_reverse_permute(stored, heads), w)
    assert np.array_equal(_reverse_permute(stored[:, 0], heads), w[:, 0])  # d and m: one value per row and group


def test_a_gguf_file_of_q4_1_blocks_reads_back_as_the_models_weights(tmp_path):
    from gguf import GGMLQuantizationType, GGUFWriter

    config = SimpleNamespace(num_attention_heads=4, num_key_value_heads=2)
    hidden, kv = 8, 4  # head dim 2: 4 query heads × 2 rows, 2 KV heads × 2 rows
    rng = np.random.default_rng(1)

    def layer_weight(rows):
        return (rng.integers(0, 16, size=(rows, GROUP)), rng.integers(1, 32, size=(rows, 1)) / 32,
                -rng.integers(0, 32, size=(rows, 1)) / 8)

    model_order = {"attn_q": layer_weight(hidden), "attn_k": layer_weight(kv), "ffn_up": layer_weight(hidden)}
    heads = {"attn_q": 4, "attn_k": 2}
    writer = GGUFWriter(str(tmp_path / "tiny.gguf"), "llama")
    for kind, (codes, d, m) in model_order.items():
        if kind in heads:  # the converter stores q and k rows in rotary order
            codes, d, m = (llama_cpp_permute(a, heads[kind]) for a in (codes, d, m))
        raw = q4_1_tensor(codes, d, m)
        writer.add_tensor(f"blk.0.{kind}.weight", raw, raw_shape=raw.shape, raw_dtype=GGMLQuantizationType.Q4_1)
    writer.add_tensor("token_embd.weight", np.zeros((4, GROUP), dtype=np.float32))  # not a layer's linear: skipped
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    blocks = q4_1_blocks(tmp_path / "tiny.gguf", config)
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "ffn_up": "mlp.up_proj"}
    assert set(blocks) == {f"model.layers.0.{name}.weight" for name in names.values()}
    for kind, (codes, d, m) in model_order.items():
        got = blocks[f"model.layers.0.{names[kind]}.weight"]
        assert torch.equal(got.codes.long(), torch.from_numpy(codes)), kind  # in the model's row order
        assert torch.equal(got.scale.float(), torch.from_numpy(d).float()), kind
        assert torch.equal(got.minimum.float(), torch.from_numpy(m).float()), kind
        assert torch.equal(got.dense(), torch.from_numpy(d * codes + m).float()), kind  # w = d·q + m, row by row


def test_the_tensor_reader_skips_every_kind_of_key_value_pair_and_reads_what_gguf_reads(tmp_path):
    """``q4_1_tensors`` skips the key-value pairs instead of building them (the default's tokenizer: 2.7 s of 3.4 s
    with ``gguf.GGUFReader``): a file with a pair of every type, arrays of strings and numbers, nested arrays, its
    own alignment and tensors of other types reads back the same Q4_1 bytes, in the same order, as GGUFReader's."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

    from explorer.models.gguf import q4_1_tensors

    rng = np.random.default_rng(2)
    path = tmp_path / "pairs.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    writer.add_uint8("a.u8", 7)
    writer.add_int16("a.i16", -3)
    writer.add_uint32("a.u32", 1 << 30)
    writer.add_float32("a.f32", 0.5)
    writer.add_bool("a.bool", True)
    writer.add_uint64("a.u64", 1 << 40)
    writer.add_float64("a.f64", -1.25)
    writer.add_string("a.text", "héllo, wörld")
    writer.add_array("a.tokens", ["<s>", "", "a token with spaces", "日本語"] * 50)
    writer.add_array("a.scores", [float(i) for i in range(300)])
    writer.add_array("a.nested", [[1, 2], [3]])
    for i in range(3):
        raw = q4_1_tensor(rng.integers(0, 16, size=(4 + i, 2 * GROUP)), rng.integers(1, 32, size=(4 + i, 2)) / 32,
                          -rng.integers(0, 32, size=(4 + i, 2)) / 8)
        writer.add_tensor(f"blk.{i}.ffn_up.weight", raw, raw_shape=raw.shape, raw_dtype=GGMLQuantizationType.Q4_1)
        writer.add_tensor(f"blk.{i}.attn_norm.weight", rng.standard_normal(5 + i).astype(np.float32))
    writer.add_tensor("output.weight", rng.standard_normal((3, GROUP)).astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    ours = list(q4_1_tensors(path))
    theirs = [t for t in GGUFReader(str(path)).tensors if t.tensor_type == GGMLQuantizationType.Q4_1]
    assert [t.name for t in ours] == [t.name for t in theirs] == [f"blk.{i}.ffn_up.weight" for i in range(3)]
    for mine, gguf_own in zip(ours, theirs):
        assert mine.raw.dtype == np.uint8 and np.array_equal(mine.raw, np.asarray(gguf_own.data)), mine.name


def test_a_cut_or_foreign_file_is_refused_in_one_line(tmp_path):
    from gguf import GGMLQuantizationType, GGUFWriter

    from explorer.models.gguf import q4_1_tensors

    whole = tmp_path / "whole.gguf"
    writer = GGUFWriter(str(whole), "llama")
    writer.add_array("a.tokens", ["x"] * 10)
    raw = q4_1_tensor(np.zeros((4, GROUP), dtype=int), np.ones((4, 1)), np.zeros((4, 1)))
    writer.add_tensor("blk.0.ffn_up.weight", raw, raw_shape=raw.shape, raw_dtype=GGMLQuantizationType.Q4_1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = whole.read_bytes()
    for name, cut in (("header.gguf", data[:40]), ("data.gguf", data[:-40]), ("text.gguf", b"not a model at all"),
                      ("empty.gguf", b"")):
        (tmp_path / name).write_bytes(cut)
        with pytest.raises(ValueError) as refused:
            list(q4_1_tensors(tmp_path / name))
        assert name in str(refused.value) and "\n" not in str(refused.value)


def test_a_conversion_parses_the_file_once_and_leaves_gguf_as_it_was(tmp_path):
    """``models.default._gguf_parsed_once``: ``transformers`` reads a GGUF three times in one conversion (28.6 →
    14.3 s here once read once). Inside the block one file is one reader and a tensor-name map is built once;
    after it, even after an error, ``gguf`` is as it was. ``transformers`` must still import both names inside its
    functions, or replacing them on the module would silently reach nothing."""
    import inspect

    import gguf
    from gguf import GGUFWriter
    from transformers import modeling_gguf_pytorch_utils as hf_gguf

    from explorer.models.default import _gguf_parsed_once

    path = tmp_path / "tiny.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"])
    writer.add_tensor("output.weight", np.ones((2, GROUP), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _gguf_parsed_once():
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(str(path)) is first and list(first.fields) == list(reader(str(path)).fields)
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    assert gguf.GGUFReader(str(path)) is not first
    with pytest.raises(KeyError), _gguf_parsed_once():
        raise KeyError("a conversion that fails")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    for function, name in ((hf_gguf.load_gguf_checkpoint, "GGUFReader"),
                           (hf_gguf.get_gguf_hf_weights_map, "get_tensor_name_map")):
        assert "from gguf import" in inspect.getsource(function) and name in inspect.getsource(function)
