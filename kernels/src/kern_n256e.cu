/* kern_n256e.cu: the 128 x 256 tile instantiations with the TMA-store
 * epilogue (8 per buffer layout: type x transposes). */
#include "launch_ts.cuh"

namespace gemmk
{
cudaError_t launch_n256e(const Launch &l, int nb)
{
    return nb == 4 ? launch_ts_nb<4, 256>(l) : launch_ts_nb<2, 256>(l);
}

bool tstore_applies(const KParams &p)
{
    return tstore_ok(p);
}
} // namespace gemmk
