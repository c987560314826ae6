"""Operations on ClTensors: shapes, dtypes and checks here, kernels in cl_kernels/."""
