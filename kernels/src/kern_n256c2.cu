/* kern_n256c2.cu: the 128 x 256 tile instantiations in 2-CTA clusters with
 * B multicast (8: type x transposes). */
#include "launch.h"

namespace gemmk
{
cudaError_t launch_n256c2(const Launch &l)
{
    return launch_bn<256, 2>(l);
}
int max_clusters2()
{
    return occupancy_clusters<256, 2>();
}
} // namespace gemmk
