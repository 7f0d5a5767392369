# coretype.sh: sourced by the GPU host's run scripts. The device host's VM
# hides the CPU's flags, so Debian's OpenBLAS (DYNAMIC_ARCH) would pick its
# generic Prescott kernels there (dgemm 4096: 1.17 s on 16 threads against
# 0.19 s with the right core). Sets and exports OPENBLAS_CORETYPE from the
# CPU's model name, unless it is set already, and says which.
model=$(grep -m1 "model name" /proc/cpuinfo)
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    case $model in
    *EPYC*) OPENBLAS_CORETYPE=Zen ;;
    *Xeon*Platinum\ 8[45]*|*Xeon*Gold\ 6[45]*|*Sapphire*|*Emerald*) OPENBLAS_CORETYPE=SapphireRapids ;;
    *) OPENBLAS_CORETYPE=SkylakeX ;;
    esac
fi
export OPENBLAS_CORETYPE
echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE ($model)"
