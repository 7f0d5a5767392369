/* kern_grouped256c2.cu: the grouped kernel's 128 x 256 instantiations in
 * clusters of two (input type x transposes), for strided batches. */
#include "grouped.h"

namespace gemmk
{
cudaError_t launch_grouped256c2(const GroupLaunch &l)
{
    return launch_grouped_bn<256, 2>(l);
}
} // namespace gemmk
