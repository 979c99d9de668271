# Script mode: write the inputs with tessera, then let PyTorch compute the outputs in one process.
# The interpreter is /usr/bin/python3 (Debian's python3-torch) unless TESSERA_PYTHON names another
# (on a GPU machine: one whose PyTorch is built with CUDA, so that the oracle also runs each case there).
file(MAKE_DIRECTORY ${DIR})
file(REMOVE ${DIR}/outputs.safetensors)
execute_process(COMMAND ${EXE} --write-inputs ${DIR}/inputs.safetensors RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "writing the conformance inputs failed (${rc})")
endif()
set(WHAT "the conformance cases")
include(${CMAKE_CURRENT_LIST_DIR}/../common/find_torch_python.cmake)
if(TORCH_MISSING)
  return()
endif()
execute_process(COMMAND ${PYTHON} ${ORACLE} ${DIR}/inputs.safetensors ${DIR}/outputs.safetensors
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the PyTorch oracle failed (${rc})")
endif()
