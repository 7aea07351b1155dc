"""NeuronCore-v3 (trn2) hardware limits the interpreter enforces (../shared/trn2-hardware.md §1.3, spec §3)."""

PMAX = 128  # partitions per tile
PSUM_FMAX = 512  # fp32 elements per partition in one PSUM bank
GEMM_STATIONARY_FMAX = 128  # stationary (lhsT) free size
GEMM_MOVING_FMAX = 512  # moving (rhs) free size
BN_STATS_FMAX = 512
PSUM_BANK_BYTES = 2048  # one bank per partition
PSUM_BANKS = 8
PSUM_BYTES_PER_PARTITION = PSUM_BANK_BYTES * PSUM_BANKS  # 16 KiB
SBUF_BYTES_PER_PARTITION = 212984  # tile_size.total_available_sbuf_size on trn2 (224 KiB physical)
VECTOR_TRANSPOSE_MAX = 32  # VectorE transpose block
