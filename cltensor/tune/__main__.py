"""`python -m cltensor.tune`: the tuner's command line (main() in __init__.py). A module of
its own, so that running it does not execute the tuner a second time beside the copy the
package imported (whose caches the GEMM engine shares)."""
import sys

from . import main

sys.exit(main())
