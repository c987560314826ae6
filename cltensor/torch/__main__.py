"""python -m cltensor.torch --coverage: which aten operators run on the opencl device."""
import argparse

import torch

from . import _backend


def coverage_lines():
    """One line per aten overload with an opencl kernel, then the count of aten overloads."""
    names = sorted(_backend.KERNELS)
    total = sum(1 for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    lines = [f"aten::{n}" for n in names]
    lines.append(f"{len(names)} aten overloads run on the opencl device; torch has {total}; "
                 f"the others without a composite form run on the CPU (cltensor.torch.fallback_ops())")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m cltensor.torch")
    parser.add_argument("--coverage", action="store_true",
                        help="list the aten operators that have opencl kernels")
    args = parser.parse_args(argv)
    if not args.coverage:
        parser.print_help()
        return 0
    print("\n".join(coverage_lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
