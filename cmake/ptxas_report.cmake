# Writes the compiler's resource report of one CUDA source (registers, spills, stack per
# kernel, as ptxas prints them with --resource-usage) into a text file, so that programs can
# read what the compiler decided instead of restating it.
#   cmake -DNVCC=... -DSOURCE=... -DOUTPUT=... "-DFLAGS=a;b;c" -P ptxas_report.cmake
# The device code is compiled to a throw-away cubin; the host side is not compiled.
execute_process(
  COMMAND ${NVCC} ${FLAGS} -cubin --resource-usage ${SOURCE} -o ${OUTPUT}.cubin
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ptxas report of ${SOURCE} failed (${status}):\n${out}${err}")
endif()
file(REMOVE ${OUTPUT}.cubin)
file(WRITE ${OUTPUT} "${out}${err}")
