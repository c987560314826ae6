"""PoCL's worker threads pinned one to a CPU by default, only where that cannot misplace them."""
import os
import subprocess
import sys

import pytest

from cltensor import pocl_threads
from conftest import subprocess_env


@pytest.mark.parametrize("environ, allowed, cpus, pins", [
    ({}, {0, 1}, 2, True),
    ({}, {0, 1, 2, 3}, 4, True),
    ({"POCL_AFFINITY": "0"}, {0, 1}, 2, False),  # the user's choice stands
    ({"POCL_MAX_PTHREAD_COUNT": "1"}, {0, 1}, 2, False),  # ranks would share CPU 0
    ({}, {1}, 2, False),  # taskset -c 1: PoCL would pin a worker to CPU 0
    ({}, {0, 2}, 4, False),
    ({}, None, 4, False),  # no affinity masks on this platform
    ({}, {0}, None, False),
])
def test_pinning_is_chosen_only_where_it_cannot_misplace_a_thread(environ, allowed, cpus, pins):
    assert pocl_threads.pins_by_default(environ, allowed, cpus) is pins


def test_the_variable_is_set_only_while_the_platforms_open():
    full = set(range(os.cpu_count()))
    if not hasattr(os, "sched_getaffinity") or os.sched_getaffinity(0) != full:
        pytest.skip("this process may not run on every CPU")
    env = {}
    with pocl_threads.pinned_start(env):
        assert env == {"POCL_AFFINITY": "1"}
    assert env == {}  # processes started later choose for themselves
    env = {"POCL_AFFINITY": "0"}
    with pocl_threads.pinned_start(env):
        assert env == {"POCL_AFFINITY": "0"}
    assert env == {"POCL_AFFINITY": "0"}


_THREADS = """
import glob, os, sys
if sys.argv[2] != "all":
    os.sched_setaffinity(0, {int(sys.argv[2])})
import cltensor as ct
x = ct.ones(1 << 16, device=ct.get_device(sys.argv[1])) * 2
assert float(x.sum().numpy()) == 2 << 16
assert "POCL_AFFINITY" not in os.environ
for task in glob.glob(f"/proc/{os.getpid()}/task/*/status"):
    line = [l for l in open(task) if l.startswith("Cpus_allowed_list")][0]
    print(line.split(":")[1].strip())
"""


def _threads_cpus(device, mask):
    env = subprocess_env()
    for name in ("POCL_AFFINITY", "POCL_MAX_PTHREAD_COUNT"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", _THREADS, device.index, mask], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def _needs_pocl_on_linux(device):
    if "Portable Computing Language" not in device.platform_name:
        pytest.skip("PoCL's thread pinning")
    if not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs Linux's /proc and at least 2 CPUs")
    if os.sched_getaffinity(0) != set(range(os.cpu_count())):
        pytest.skip("this process may not run on every CPU")


def test_pocl_workers_run_pinned_one_to_a_cpu(device):
    _needs_pocl_on_linux(device)
    lists = _threads_cpus(device, "all")
    every = f"0-{os.cpu_count() - 1}"
    pinned = [c for c in lists if c != every]
    # the main thread and any of pyopencl's keep every CPU; PoCL's workers one each
    assert len(pinned) >= 2 and all(c.isdigit() for c in pinned), lists
    assert len(set(pinned)) == len(pinned), lists


def test_pocl_workers_stay_within_a_restricted_process(device):
    _needs_pocl_on_linux(device)
    last = str(os.cpu_count() - 1)
    assert set(_threads_cpus(device, last)) == {last}
