# Script mode: write the inputs with tessera, then let PyTorch compute the outputs in one process.
# The interpreter is /usr/bin/python3 (Debian's python3-torch) unless TESSERA_PYTHON names another
# (on a GPU machine: one whose PyTorch is built with CUDA, so that the oracle also runs each case there).
file(MAKE_DIRECTORY ${DIR})
file(REMOVE ${DIR}/outputs.safetensors)
execute_process(COMMAND ${EXE} --write-inputs ${DIR}/inputs.safetensors RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "writing the conformance inputs failed (${rc})")
endif()
set(PYTHON /usr/bin/python3)
if(DEFINED ENV{TESSERA_PYTHON} AND NOT "$ENV{TESSERA_PYTHON}" STREQUAL "")
  set(PYTHON "$ENV{TESSERA_PYTHON}")
endif()
execute_process(COMMAND ${PYTHON} -c "import torch" RESULT_VARIABLE no_torch OUTPUT_QUIET ERROR_QUIET)
if(no_torch)
  if("$ENV{CI}" STREQUAL "true")
    message(FATAL_ERROR "PyTorch is missing (${PYTHON} cannot import torch; Debian package python3-torch): "
                        "the conformance suite cannot run")
  endif()
  message(WARNING "PyTorch is missing (Debian package python3-torch): the conformance cases will be skipped")
  return()
endif()
execute_process(COMMAND ${PYTHON} ${ORACLE} ${DIR}/inputs.safetensors ${DIR}/outputs.safetensors
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the PyTorch oracle failed (${rc})")
endif()
