// Out-of-line members of the contract's types: kernels.h holds no inline function (see there).
#include "kernels.h"

namespace ringlm::internal {

bool WeightView::present() const { return data != nullptr; }

}  // namespace ringlm::internal
