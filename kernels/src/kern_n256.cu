/* kern_n256.cu: the 128 x 256 tile instantiations without clusters
 * (8: type x transposes). */
#include "launch.h"

namespace gemmk
{
cudaError_t launch_n256(const Launch &l)
{
    return launch_bn<256, 1>(l);
}
} // namespace gemmk
