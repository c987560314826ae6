"""Convolution tuning (cltensor/tune_conv.py, `python -m cltensor.tune conv`): the measured
choices are recorded as tuned in benchmark mode's per-user file, and algo="auto" follows them
for exactly those problems with benchmark mode off, its rules elsewhere."""
import json

import numpy as np
import pytest

import cltensor
from cltensor import backends, tune, tune_conv
from cltensor.conv import dispatch
from cltensor.conv.params import make_params

# one small layer: (in channels, side, out channels, kernel, stride, padding)
TINY = {"tiny": ((4, 6, 5, 3, 1, 1),)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backends, "benchmark", False)
    monkeypatch.setattr(backends, "conv_precision", "fast")  # every eligible algorithm timed
    monkeypatch.setattr(tune_conv, "LAYERS", TINY)
    monkeypatch.setattr(tune_conv, "QUICK", ("tiny",))
    monkeypatch.setattr(tune_conv, "BATCHES", {"tiny": (2, 2)})
    dispatch.clear_cache()
    yield tmp_path
    dispatch.clear_cache()


def _problem(device, rng):
    x = cltensor.from_numpy(rng.standard_normal((2, 4, 6, 6), dtype=np.float32), device=device)
    w = cltensor.from_numpy(rng.standard_normal((5, 4, 3, 3), dtype=np.float32), device=device)
    return x, w, make_params(x, w, None, 1, 1, 1, 1)


def _rewrite(device, pass_, algo, tuned):
    """Set the file's choice of the tiny problem's pass, as another process would."""
    path = dispatch.cache_path(device)
    data = json.loads(path.read_text())
    key = next(k for k in data if k.endswith("|" + pass_))
    data[key]["algo"] = algo
    data[key].pop("tuned", None)
    if tuned:
        data[key]["tuned"] = True
    path.write_text(json.dumps(data))
    dispatch.clear_cache()


def test_tuner_records_every_pass(device, cache):
    entry, results = tune_conv.tune_conv(device, quick=True, log=lambda *a: None)
    assert entry["problems"] == len(dispatch.PASSES) == len(results)
    assert sum(entry["wins"].values()) == len(results)
    data = json.loads(dispatch.cache_path(device).read_text())
    assert len(data) == len(dispatch.PASSES)
    for r in results:
        assert r["batch"] == 2 and r["algo"] == min(r["times_ms"], key=r["times_ms"].get)
        assert all(t >= 0 for t in r["times_ms"].values()) and len(r["times_ms"]) >= 2
    assert all(e["tuned"] is True and e["algo"] in e["times_ms"] for e in data.values())


def test_auto_follows_tuned_choices_only(device, cache, rng):
    x, w, p = _problem(device, rng)
    tune_conv.tune_conv(device, quick=True, log=lambda *a: None)
    ruled = dispatch.rule(p, device, "forward")
    other = next(n for n in dispatch.eligible_names(p, "forward", device) if n != ruled)
    _rewrite(device, "forward", other, tuned=True)
    assert dispatch.choose(p, device, "forward") == other
    out = cltensor.nn.functional.conv2d(x, w, padding=1)
    ref = cltensor.nn.functional.conv2d(x, w, padding=1, algo=ruled)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
    # benchmark mode's own choices (not marked) leave auto on its rules
    _rewrite(device, "forward", other, tuned=False)
    assert dispatch.choose(p, device, "forward") == ruled
    # another batch is another problem: the rules again
    x1 = cltensor.from_numpy(rng.standard_normal((1, 4, 6, 6), dtype=np.float32), device=device)
    p1 = make_params(x1, w, None, 1, 1, 1, 1)
    assert dispatch.choose(p1, device, "forward") == dispatch.rule(p1, device, "forward")


def test_tuned_choice_not_admitted_gives_way(device, cache, rng, monkeypatch):
    """Under "accurate" a recorded algorithm outside the admitted ones is not followed: the
    fastest admitted one the file timed is."""
    _x, _w, p = _problem(device, rng)
    tune_conv.tune_conv(device, quick=True, log=lambda *a: None)
    monkeypatch.setattr(backends, "conv_precision", "accurate")
    dispatch.clear_cache()
    admitted = dispatch.candidates(p, "forward", device)
    refused = [n for n in dispatch.eligible_names(p, "forward", device) if n not in admitted]
    if not refused:
        pytest.skip("every eligible algorithm is admitted for this problem on this device")
    _rewrite(device, "forward", refused[0], tuned=True)
    times = dispatch.timings(device, p, "forward")
    assert dispatch.choose(p, device, "forward") == min(admitted, key=times.get)


def test_no_store_records_nothing(device, cache):
    entry, results = tune_conv.tune_conv(device, quick=True, record=False, log=lambda *a: None)
    assert entry["problems"] == len(results) == len(dispatch.PASSES)
    assert not dispatch.cache_path(device).exists()


def test_cli_conv(device, cache, capsys):
    assert tune.main(["conv", "--device", str(device.index), "--quick", "--batch", "1"]) == 0
    data = json.loads(dispatch.cache_path(device).read_text())
    assert len(data) == len(dispatch.PASSES) and all(k.startswith("n1c4h6w6-") for k in data)
    assert "recorded in" in capsys.readouterr().out


def test_file_with_bad_tuned_flag_is_refused():
    good = {"algo": "im2col", "times_ms": {"im2col": 1.0}, "vendor": "pocl", "tuned": True}
    dispatch.validate_disk({"k|forward": good})
    with pytest.raises(ValueError, match="tuned a bool"):
        dispatch.validate_disk({"k|forward": dict(good, tuned="yes")})


def test_autotune_times_a_problem_on_first_use(device, cache, rng, monkeypatch):
    x, w, p = _problem(device, rng)
    monkeypatch.setenv("CLTENSOR_AUTOTUNE", "1")
    monkeypatch.setattr(dispatch, "_first_use_warned", set())
    xg = x.detach().requires_grad_(True)
    with pytest.warns(tune.TuningWarning, match="timed on first use"):
        out = cltensor.nn.functional.conv2d(xg, w, padding=1)
    out.sum().backward()
    data = json.loads(dispatch.cache_path(device).read_text())
    assert {k.rsplit("|", 1)[1] for k in data} == {"forward", "backward_data"}
    assert all(e["tuned"] and len(e["times_ms"]) >= 2 for e in data.values())
    # a later process follows the recorded choices without timing
    dispatch.clear_cache()
    monkeypatch.setattr(dispatch, "time_pass", lambda *a: pytest.fail("timed again"))
    assert dispatch.choose(p, device, "forward", tensors=(x, w, None)) == \
        data[next(k for k in data if k.endswith("|forward"))]["algo"]
    monkeypatch.delenv("CLTENSOR_AUTOTUNE")
    x1 = cltensor.from_numpy(rng.standard_normal((1, 4, 6, 6), dtype=np.float32), device=device)
    cltensor.nn.functional.conv2d(x1, w, padding=1)  # off again: the rules, nothing timed
