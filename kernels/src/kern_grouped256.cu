/* kern_grouped256.cu: the grouped kernel's 128 x 256 instantiations
 * (input type x transposes), for classes of wide problems. */
#include "grouped.h"

namespace gemmk
{
cudaError_t launch_grouped256(const GroupLaunch &l)
{
    return launch_grouped_bn<256>(l);
}
} // namespace gemmk
