"""What Ember knows of a target CPU: the machine model its schedules are sized from.

    >>> print(ember.target.machine_model("llvm -mcpu=znver1"))
    znver1, 256-bit vectors (16 registers): FMA 1/cycle, latency 5, 128-bit datapath; ...

The FMA and load facts come from LLVM's scheduling model of the CPU (the host's CPU name for
"llvm", the -mcpu name otherwise); cache sizes from sysfs for the host and from a table of
known CPUs for a named one. `source` says which. ember.build sizes the default CPU schedules
from this model; see src/passes/schedule/README.md and src/codegen/README.md.
"""
from dataclasses import dataclass

from . import _ember


@dataclass(frozen=True)
class MachineModel:
    cpu: str                # LLVM's name of the CPU
    source: str             # where the facts come from
    vector_bits: int        # the width the code uses (-vector-bits, else the CPU's widest)
    vector_registers: int
    fma_per_cycle: int      # vector FMAs of vector_bits issued per cycle
    fma_latency: int        # cycles
    fma_datapath_bits: int  # the FMA units' width (a wider vector issues in pieces)
    loads_per_cycle: int    # vector loads of vector_bits per cycle
    l1_bytes: int           # per core (data)
    l2_bytes: int           # per core
    l3_bytes: int           # shared
    int8_dot: bool          # VNNI at this width: int8 products run as int8 kernels
    int8_dot_7bit: bool     # those of activations below 128 (reduce_range) do: VNNI, or
                            # vpmaddubsw twice a cycle (AVX2 on Skylake, Zen 3 and later)
    bf16_dot: bool          # AVX512_BF16 at this width: bfloat16 denses run as vdpbf16ps

    def __str__(self):
        def size(b):
            return f"{b >> 20} MiB" if b >= 1 << 20 and b % (1 << 20) == 0 else f"{b >> 10} KiB"
        return (f"{self.cpu}, {self.vector_bits}-bit vectors ({self.vector_registers} "
                f"registers): FMA {self.fma_per_cycle}/cycle, latency {self.fma_latency}, "
                f"{self.fma_datapath_bits}-bit datapath; {self.loads_per_cycle} vector "
                f"loads/cycle; L1d {size(self.l1_bytes)}, L2 {size(self.l2_bytes)}, "
                f"L3 {size(self.l3_bytes)}{'; int8 dot products (VNNI)' if self.int8_dot else ''}"
                f"{'; 7-bit int8 dot products' if self.int8_dot_7bit and not self.int8_dot else ''}"
                f"{'; bfloat16 dot products' if self.bf16_dot else ''} "
                f"({self.source})")


def machine_model(target="llvm"):
    """The machine model of a CPU target string ("llvm", "llvm -mcpu=znver1 ...")."""
    return MachineModel(**_ember._machine_model(target))
