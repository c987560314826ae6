"""The wheel ships every package, every kernel and the tuning database (an installed copy must
find them): built from a copy of the sources and read back."""
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("pyproject.toml", "README.md", "cltensor", "cl_kernels", "convnet_benchmarks")


def _packages_on_disk():
    found = set()
    for top in ("cltensor", "convnet_benchmarks"):
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files or any(f.endswith(".json") for f in files):
                found.add(os.path.relpath(dirpath, ROOT).replace(os.sep, "."))
    return found


def test_every_package_is_listed():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    missing = _packages_on_disk() - listed
    assert not missing, f"packages missing from pyproject.toml: {sorted(missing)}"


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory):
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed in this environment: the wheel cannot be built")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "-w", str(dist), str(src)], check=True)
    (wheel,) = dist.glob("cltensor-*.whl")
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def test_wheel_ships_kernels_tuning_data_and_packages(wheel_names):
    kernels = [f for f in os.listdir(os.path.join(ROOT, "cl_kernels")) if f.endswith(".cl")]
    assert kernels
    missing = [k for k in kernels if f"cltensor/cl_kernels/{k}" not in wheel_names]
    tuning = os.listdir(os.path.join(ROOT, "cltensor", "tuning"))
    missing += [t for t in tuning if f"cltensor/tuning/{t}" not in wheel_names]
    for package in _packages_on_disk():
        init = package.replace(".", "/") + "/__init__.py"
        if os.path.exists(os.path.join(ROOT, init)) and init not in wheel_names:
            missing.append(init)
    assert not missing, f"files missing from the wheel: {missing}"
