"""The kernel choice (``engine.kernels``): measured once per machine and model shape, kept on disk, forced by
``EXPLORER_KERNELS``, taken by a draft's layers from their target; every kernel computes the same products;
and the machine record every figure carries (``explorer.machine``)."""

import json

import pytest
import torch

import explorer
from explorer import machine
from explorer.engine import fast, kernels
from explorer.engine.cache import CachedForward
from explorer.engine.fast import fast_view
from explorer.engine.kernel_linear import KernelLinear
from explorer.engine.forward import full_forward
from explorer.errors import ExplorerError

pytestmark = pytest.mark.skipif(kernels.available(torch.float32) != kernels.KINDS,
                                reason="this torch has no oneDNN linear")


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A fresh $EXPLORER_CACHE: nothing measured on this machine yet."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path))
    return tmp_path


def test_the_fastest_kernel_wins_each_bucket_unless_a_kernel_in_use_is_as_fast():
    ms = {"1": {"mkl": 10.0, "onednn-1": 12.0, "onednn-8": 20.0},
          "2-8": {"mkl": 40.0, "onednn-1": 30.0, "onednn-8": 15.0},
          "9-64": {"mkl": 90.0, "onednn-1": 80.0, "onednn-8": 50.0}}
    assert kernels.decide(ms) == ("mkl", "onednn-8", "onednn-8")
    ms["1"]["onednn-8"] = 10.2  # within 3 % of MKL: the layout the other buckets hold anyway
    assert kernels.decide(ms) == ("onednn-8",) * 3
    ms["1"]["onednn-8"] = 10.5  # 5 % slower: one more layout in memory is worth it
    assert kernels.decide(ms) == ("mkl", "onednn-8", "onednn-8")


@pytest.mark.parametrize("value, kinds", [
    ("onednn-1", ("onednn-1",) * 3), ("MKL", ("mkl",) * 3),
    ("1=mkl, 2-8=onednn-8, 9-64=onednn-1", ("mkl", "onednn-8", "onednn-1")),
])
def test_the_environment_forces_a_choice(monkeypatch, value, kinds):
    monkeypatch.setenv("EXPLORER_KERNELS", value)
    assert kernels.forced().kinds == kinds and kernels.forced().how == "forced"


@pytest.mark.parametrize("value", ["fast", "1=mkl", "1=mkl,2-8=onednn-8,9-64=cuda", "1=mkl,1=mkl,2-8=mkl"])
def test_a_choice_that_is_none_is_refused_in_one_line(monkeypatch, value):
    monkeypatch.setenv("EXPLORER_KERNELS", value)
    with pytest.raises(ExplorerError) as err:
        kernels.forced()
    assert "\n" not in str(err.value) and "EXPLORER_KERNELS" in str(err.value) and "1=mkl" in str(err.value)


def test_auto_measures_once_then_every_process_reads_the_choice(own_cache, monkeypatch):
    monkeypatch.delenv("EXPLORER_KERNELS", raising=False)
    first = explorer.load("tiny-random:21").model
    fast_view(first)
    choice = fast.kernel_choice(first)
    assert choice.how == "measured" and set(choice.ms) == set(kernels.BUCKETS)
    assert all(set(row) == set(kernels.KINDS) and all(v > 0 for v in row.values()) for row in choice.ms.values())
    assert choice.kinds == kernels.decide(choice.ms)
    files = list((own_cache / "kernels").glob("*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    assert record["machine"]["cpu"] == machine.describe()["cpu"] and record["kinds"] == list(choice.kinds)
    # another model object of the same shapes (a later process, a reload) finds it
    again = explorer.load("tiny-random:21").model
    fast_view(again)
    assert fast.kernel_choice(again).how == "cached" and fast.kernel_choice(again).kinds == choice.kinds
    # a damaged file is measured again, not trusted
    files[0].write_text("{not json")
    third = explorer.load("tiny-random:21").model
    fast_view(third)
    assert fast.kernel_choice(third).how == "measured"


def test_the_choice_is_per_bucket_and_each_linear_runs_its_bucket_kernel(monkeypatch):
    monkeypatch.setenv("EXPLORER_KERNELS", "1=mkl,2-8=onednn-1,9-64=onednn-8")
    model = explorer.load("tiny-random:22").model
    view = fast_view(model)
    linear = view.lm_head
    assert isinstance(linear, KernelLinear) and linear.kinds == ("mkl", "onednn-1", "onednn-8")
    assert set(linear.forms) == {"mkl", "onednn-1", "onednn-8"}
    assert linear.forms["mkl"] is linear.dense and linear.dense.data_ptr() == model.lm_head.weight.data_ptr()
    assert linear.extra_bytes() == 2 * model.lm_head.weight.numel() * 4  # two packed copies, the dense one shared


@pytest.mark.parametrize("kind", kernels.KINDS)
def test_every_kernel_computes_the_models_logits(monkeypatch, kind):
    monkeypatch.setenv("EXPLORER_KERNELS", kind)
    model = explorer.load("tiny-random:23").model
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]
    runner = CachedForward(full_forward(model), torch.device("cpu"))
    with torch.inference_mode():
        for n in (1, 5, 12):  # one row, a verification, a tree
            runner.truncate(len(ids) - n - 1)
            ours = runner.logits(ids[: len(ids) - 1], n)
            ref = model(input_ids=torch.tensor([ids[: len(ids) - 1]])).logits[0, -n:]
            assert (ours - ref).abs().max() < 1e-4
    assert fast.kernel_choice(model).kinds == (kind,) * 3


def test_a_drafts_layers_take_their_targets_choice(monkeypatch):
    """``like=``: an exit layer or a draft head runs its target's kernels (measured on the target's
    linears), even when it is viewed first."""
    monkeypatch.setenv("EXPLORER_KERNELS", "onednn-1")
    target = explorer.load("tiny-random:24").model
    monkeypatch.setenv("EXPLORER_KERNELS", "auto")
    layer_view = fast_view(target.model.layers[0], like=target)  # the target has no view yet
    assert fast.kernel_choice(target.model.layers[0]).kinds == fast.kernel_choice(target).kinds
    assert layer_view.qkv.kinds == fast.kernel_choice(target).kinds


def test_the_machine_record_says_what_changes_between_cpus():
    record = machine.describe()
    assert record["cores"] >= 1 and record["torch"] == torch.__version__ and isinstance(record["units"], list)
    words = machine.words(dtype="float32")
    assert record["cpu"] in words and f"{record['cores']} cores" in words and "float32" in words
    assert machine.fingerprint("a") != machine.fingerprint("b") and machine.fingerprint("a") == machine.fingerprint("a")
    # a record read back from a report, with fields missing, still reads as words
    assert machine.words({"cpu": "Some CPU"}) == "Some CPU"


def test_a_fused_weight_no_kernel_reads_is_freed(monkeypatch):
    """The fused q/k/v and gate/up weights are copies; where only packed kernels run, the dense copy goes
    (its storage, not just its view: a forgotten [:0] view kept 278 MB of the default model alive)."""
    monkeypatch.setenv("EXPLORER_KERNELS", "onednn-8")
    layer = fast_view(explorer.load("tiny-random:25").model).model.layers[0]
    for linear in (layer.qkv, layer.gate_up):
        assert linear.dense.untyped_storage().nbytes() == 0 and set(linear.forms) == {"onednn-8"}
    monkeypatch.setenv("EXPLORER_KERNELS", "1=mkl,2-8=onednn-8,9-64=onednn-8")
    layer = fast_view(explorer.load("tiny-random:25").model).model.layers[0]
    assert layer.qkv.dense.numel() == layer.qkv.in_features * layer.qkv.out_features  # MKL reads it
