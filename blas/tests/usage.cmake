# blas_usage_*: the command lines of blas/README.md's usage block, run exactly as
# written (but for the install prefix) for each kind of program; a test
# whose program is not installed is skipped (exit 77).
foreach(lang numpy r octave c fortran)
  gemmblas_script_test(blas_usage_${lang} 300 system usage.sh ${lang})
endforeach()

# What GEMMBLAS_VERBOSE says about the CPU path (no gemmd needed).
gemmblas_script_test(blas_verbose 60 "" verbose.sh)

# numpy wheels' own BLAS (stand-ins): its GEMMs go to gemmd, and one out of
# reach is named at exit.
gemmblas_script_test(blas_wheel 60 "" wheel.sh)
