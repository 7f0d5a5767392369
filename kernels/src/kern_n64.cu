/* kern_n64.cu: the 128 x 64 tile instantiations (8: type x transposes), 8
 * stages deep: skinny shapes (small M, N ~ 8K) get >= 128 tiles without
 * split-K. */
#include "launch.h"

namespace gemmk
{
cudaError_t launch_n64(const Launch &l)
{
    return launch_bn<64, 1>(l);
}
} // namespace gemmk
