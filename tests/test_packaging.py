"""The wheel ships every package and every kernel (an installed copy must find its kernels)."""
import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_is_listed():
    listed = set(_config()["packages"])
    found = set()
    for top in ("cltensor", "convnet_benchmarks"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            if "__init__.py" in files:
                found.add(os.path.relpath(dirpath, ROOT).replace(os.sep, "."))
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_kernels_and_tuning_data_ship():
    cfg = _config()
    assert cfg["package-dir"]["cltensor.cl_kernels"] == "cl_kernels"
    assert "*.cl" in cfg["package-data"]["cltensor.cl_kernels"]
    assert any(p.startswith("tuning/") for p in cfg["package-data"]["cltensor"])
    assert all(f.endswith(".cl") for f in os.listdir(os.path.join(ROOT, "cl_kernels")))
