# The `tessera train --model gpt2` command end to end on the CPU (ctest runs this script with -P):
# a few steps of a tiny model on a generated text file must print losses, tokens/s and a sample; bad
# arguments must fail with a message. Variables: TESSERA (the command), WORK (a scratch directory).
file(MAKE_DIRECTORY "${WORK}")
set(text "")
foreach(i RANGE 400)
  string(APPEND text "In the beginning God created the heaven and the earth. And the earth was without form.\n")
endforeach()
file(WRITE "${WORK}/tiny.txt" "${text}")

execute_process(
  COMMAND "${TESSERA}" train --model gpt2 --data "text:${WORK}/tiny.txt" --device cpu --threads 2 --layers 1
          --heads 2 --embd 32 --context 32 --batch-size 8 --steps 12 --log-every 4 --eval-every 6 --eval-iters 2
          --warmup 2 --accum 2 --sample-tokens 16 --top-k 10
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera train --model gpt2 failed (${rc}):\n${out}\n${err}")
endif()
foreach(expect "step 12/12 \\| loss [0-9.]+ \\| lr" "tok/s" "step 12: train loss [0-9.]+, val loss [0-9.]+"
               "---- sample \\(16 bytes")
  if(NOT out MATCHES "${expect}")
    message(FATAL_ERROR "tessera train --model gpt2: no '${expect}' in its output:\n${out}")
  endif()
endforeach()
if(out MATCHES "MFU")
  message(FATAL_ERROR "tessera train on the CPU printed an MFU:\n${out}")
endif()

# Bad arguments: a message and a non-zero exit status.
foreach(case "--model;gpt2" "--model;gpt2;--data;text:${WORK}/tiny.txt;--embd;30;--heads;4"
             "--model;gpt2;--data;text:${WORK}/missing.txt;--device;cpu" "--model;gpt2;--accum;0")
  execute_process(COMMAND "${TESSERA}" train ${case} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "tessera: ")
    message(FATAL_ERROR "tessera train ${case}: expected a failure with a message, got ${rc}:\n${out}\n${err}")
  endif()
endforeach()
