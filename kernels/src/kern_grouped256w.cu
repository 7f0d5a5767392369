/* kern_grouped256w.cu: the grouped kernel's 128 x 256 instantiations
 * whose consumers store their whole 64 x 256 block in one TMA-store step
 * (a ring of 3 stages), for strided batches (input type x transposes). */
#include "grouped.h"

namespace gemmk
{
cudaError_t launch_grouped256w(const GroupLaunch &l)
{
    return launch_grouped_bn<256, 1, 4>(l);
}
} // namespace gemmk
