#include "platform/kernels_isa.h"
// Interim: the NEON tables land in the next commits.
#if defined(RINGLM_KERNELS_A64)
namespace ringlm {
const KernelTable* kernels_neon() { return kernels_ref(); }
const KernelTable* kernels_dotprod() { return kernels_ref(); }
const KernelTable* kernels_i8mm() { return kernels_ref(); }
}  // namespace ringlm
#elif defined(RINGLM_KERNELS_ARMV7)
namespace ringlm {
const KernelTable* kernels_armv7() { return kernels_ref(); }
}  // namespace ringlm
#endif
