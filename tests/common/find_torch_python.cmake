# Script-mode helper of the PyTorch oracles (conformance, random programs): PYTHON is /usr/bin/python3
# (Debian's python3-torch) unless TESSERA_PYTHON names another. Sets TORCH_MISSING when that interpreter
# cannot import torch: a fatal error under CI=true, else a warning naming WHAT (the caller then returns,
# and its tests skip, saying so).
set(PYTHON /usr/bin/python3)
if(DEFINED ENV{TESSERA_PYTHON} AND NOT "$ENV{TESSERA_PYTHON}" STREQUAL "")
  set(PYTHON "$ENV{TESSERA_PYTHON}")
endif()
set(TORCH_MISSING FALSE)
execute_process(COMMAND ${PYTHON} -c "import torch" RESULT_VARIABLE no_torch OUTPUT_QUIET ERROR_QUIET)
if(no_torch)
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "PyTorch is missing (${PYTHON} cannot import torch; Debian package python3-torch): "
                        "${WHAT} cannot run")
  endif()
  message(WARNING "PyTorch is missing (Debian package python3-torch): ${WHAT} will be skipped")
  set(TORCH_MISSING TRUE)
endif()
