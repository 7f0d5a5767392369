/* kern_grouped128.cu: the grouped kernel's 128 x 128 instantiations
 * (input type x transposes), and the launch that picks a tile width. */
#include "grouped.h"

namespace gemmk
{
cudaError_t launch_grouped128(const GroupLaunch &l)
{
    return launch_grouped_bn<128>(l);
}
cudaError_t launch_grouped(const GroupLaunch &l)
{
    if (l.bn == 256)
        return l.cl == 2 ? launch_grouped256c2(l)
               : l.whole ? launch_grouped256w(l)
                         : launch_grouped256(l);
    return launch_grouped128(l);
}
} // namespace gemmk
