/* kern_n192e.cu: the 128 x 192 tile instantiations with the TMA-store
 * epilogue (type x transposes; three 64 x 64 buffers a consumer, one
 * store step, 4 stages). */
#include "launch_ts.cuh"

namespace gemmk
{
cudaError_t launch_n192e(const Launch &l)
{
    return launch_ts_nb<3, 192>(l);
}
} // namespace gemmk
