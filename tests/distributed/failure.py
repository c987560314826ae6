"""Run under mpirun: `raise` - rank 1 raises before a collective that rank 0 waits in;
`timeout` - rank 1 never joins rank 0's all_reduce (a 2 s timeout); `timeout-shm` - the same
with an all_reduce large enough for the host's shared memory. Each must end the job."""
import sys
import time

import numpy as np

import cltensor as ct
import cltensor.distributed as dist


def main(mode):
    dist.init_process_group("mpi", timeout=None if mode == "raise" else 2)
    t = ct.from_numpy(np.ones(5 if mode != "timeout-shm" else 1 << 20, np.float32))
    if dist.get_rank() == 1:
        if mode == "raise":
            raise ValueError("rank one cannot go on")
        time.sleep(60)  # never joins; rank 0's timeout must end the job
    dist.all_reduce(t)
    print("all_reduce returned", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
