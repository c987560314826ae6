#!/usr/bin/env bash
# Sets up cltensor on a Debian-like machine: an OpenCL CPU device (PoCL), a virtual environment
# in .venv and the package with its test extras. Idempotent; the README's two commands call it.
#   PoCL: Debian's pocl-opencl-icd where apt works (measured 4-10x faster than the PyPI build),
#   else PyPI's pocl-binary-distribution inside the venv.
#   Intel's OpenCL CPU runtime (intel-opencl-rt from PyPI, into the venv): the second CPU
#   implementation CI tests on; skipped with a message where pip cannot get it.
#   .venv/icd/<implementation>/ holds one ICD file each, so that OCL_ICD_VENDORS=.venv/icd/pocl
#   (or .venv/icd/intel, with LD_LIBRARY_PATH=.venv/lib) selects one implementation (.ci/run).
#   --torch also installs PyTorch 2.13 (CPU) so that the tests and benchmarks compare against it.
set -euo pipefail
cd "$(dirname "$0")/.."
with_torch=""
[ "${1:-}" = "--torch" ] && with_torch="torch==2.13.0"

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

apt_install() {
  command -v apt-get >/dev/null || return 1
  if [ -z "${CLTENSOR_APT_UPDATED:-}" ]; then
    $SUDO apt-get update -q >/dev/null || return 1
    export CLTENSOR_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

pocl_from_pip=""
if ! dpkg -s pocl-opencl-icd >/dev/null 2>&1; then
  if apt_install pocl-opencl-icd ocl-icd-libopencl1; then
    echo "setup: installed Debian's pocl-opencl-icd"
  else
    echo "setup: apt unavailable, falling back to PyPI's pocl-binary-distribution"
    pocl_from_pip="pocl-binary-distribution"
  fi
fi

# Oclgrind (optional): the simulator device of the sanitizer run, pytest -m oclgrind.
if ! dpkg -s oclgrind >/dev/null 2>&1; then
  apt_install oclgrind && echo "setup: installed Oclgrind (pytest -m oclgrind)" \
    || echo "setup: Oclgrind not installed (apt unavailable); pytest -m oclgrind will skip"
fi

# Open MPI (optional): cltensor.distributed's transport; mpi4py comes with the distributed extra.
extras="test,tinygrad"
if ! command -v mpirun >/dev/null || ! dpkg -s libopenmpi-dev >/dev/null 2>&1; then
  apt_install openmpi-bin libopenmpi-dev && echo "setup: installed Open MPI (cltensor.distributed)" \
    || echo "setup: Open MPI not installed (apt unavailable); the mpirun tests will skip"
fi
if command -v mpirun >/dev/null; then extras="$extras,distributed"; fi

if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv 2>/dev/null; then
    rm -rf .venv
    apt_install python3-venv
    python3 -m venv .venv
  fi
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[$extras]" $pocl_from_pip $with_torch

# Intel's OpenCL CPU runtime: its libraries land in .venv/lib, which its ICD file names
if [ ! -e .venv/lib/libintelocl.so ]; then
  .venv/bin/python -m pip install -q intel-opencl-rt intel-cmplr-lib-rt >/dev/null 2>&1 || true
fi

write_icd() {  # write_icd NAME LIBRARY: .venv/icd/NAME/NAME.icd naming LIBRARY
  rm -rf ".venv/icd/$1"
  mkdir -p ".venv/icd/$1"
  echo "$2" >".venv/icd/$1/$1.icd"
}
pocl_lib=""
if [ -f /etc/OpenCL/vendors/pocl.icd ]; then
  pocl_lib="$(head -n 1 /etc/OpenCL/vendors/pocl.icd)"
else
  pocl_lib="$(find "$PWD/.venv" -name 'libpocl.so*' -type f 2>/dev/null | sort | head -n 1)"
fi
if [ -n "$pocl_lib" ]; then
  write_icd pocl "$pocl_lib"
else
  echo "setup: PoCL's library not found; .venv/icd/pocl not written"
fi
if [ -e .venv/lib/libintelocl.so ]; then
  write_icd intel "$PWD/.venv/lib/libintelocl.so"
  echo "setup: Intel's OpenCL CPU runtime in .venv/icd/intel (with LD_LIBRARY_PATH=.venv/lib)"
else
  rm -rf .venv/icd/intel
  echo "setup: Intel's OpenCL CPU runtime not installed (pip could not get intel-opencl-rt);" \
    "the tests run on PoCL alone"
fi
.venv/bin/python -m cltensor
