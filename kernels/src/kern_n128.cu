/* kern_n128.cu: the 128 x 128 tile instantiations (8: type x transposes),
 * used for small M and with split-K;  */
#include "launch.h"

namespace gemmk
{
cudaError_t launch_n128(const Launch &l)
{
    return launch_bn<128, 1>(l);
}
} // namespace gemmk
