"""python -m cltensor: the OpenCL devices present, which one is the default, and the plug-ins
with the devices they serve."""
import sys

from . import device
from .plugins import plugins


def _gib(n):
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def main():
    infos = device.devices()
    if not infos:
        print(device.NO_DEVICE_HELP, file=sys.stderr)
        return 1
    default = device.default_device().index
    print(f"{'':2s}{'index':6s} {'type':5s} {'CUs':>4s} {'global':>9s} {'local':>8s} "
          f"{'max alloc':>9s} {'max wg':>6s} {'fp64':4s}  platform | device")
    for d in infos:
        mark = "* " if d.index == default else "  "
        print(f"{mark}{d.index:6s} {d.type:5s} {d.compute_units:4d} {_gib(d.global_mem):>9s} "
              f"{_gib(d.local_mem):>8s} {_gib(d.max_alloc):>9s} {d.max_work_group:6d} "
              f"{'yes' if d.fp64 else 'no':4s}  {d.platform} | {d.name}")
    print("* default device (set CLTENSOR_DEVICE to a 'platform:device' index or a name to change it)")
    _print_plugins(device.all_devices())
    return 0


def _print_plugins(devs):
    found = plugins()
    print(f"\nplug-ins ({len(found)}; cltensor.register_plugin or the 'cltensor.plugins' "
          f"entry points):")
    for pl in found:
        print(f"  {pl.name}: {pl.description or '(no description)'}")
        for d in devs:
            why = pl.why_not(d)
            print(f"    {d.index:6s} {'serves' if not why else 'no: ' + why}  ({d.name})")


if __name__ == "__main__":
    sys.exit(main())
