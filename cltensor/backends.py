"""Backend flags, after torch.backends: read at call time, so they can be set at any moment.

    benchmark            like torch.backends.cudnn.benchmark: conv2d's algo="auto" times every
                         eligible algorithm once per (device, problem) and keeps the fastest, in
                         memory and in a per-user file keyed by device and driver
                         (cltensor/conv/dispatch.py)
    conv_workspace_limit bytes of scratch memory an algorithm may use at once (im2col's column
                         buffer, Winograd's transformed tiles); larger problems run in chunks
    allow_tf32           reserved: no kernel uses reduced-precision multiplies yet (False keeps
                         IEEE fp32 everywhere, as torch.backends.cuda.matmul.allow_tf32 = False)
"""
benchmark = False
conv_workspace_limit = 256 * 2**20
allow_tf32 = False
