# The `tessera train --model gpt2` command end to end on the CPU (ctest runs this script with -P):
# a few steps of a tiny model on a generated text file must print losses, tokens/s and a sample; bad
# arguments must fail with a message; a run stopped with --stop-at and resumed writes its checkpoint,
# metrics and profile. Variables: TESSERA (the command), WORK (a scratch directory).
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

# --checkpoint, --stop-at, --resume, --metrics and --profile with gpt2: the first run stops at step 4,
# the second continues it to 8 and profiles steps 3-5 of its own; the metrics file holds all 8 steps.
set(common --model gpt2 --data "text:${WORK}/tiny.txt" --device cpu --threads 2 --layers 1 --heads 2 --embd 32
           --context 32 --batch-size 4 --steps 8 --log-every 1 --eval-every 4 --eval-iters 1 --sample-tokens 0
           --checkpoint "${WORK}/ckpt" --metrics "${WORK}/gpt.csv")
file(REMOVE_RECURSE "${WORK}/ckpt")
execute_process(COMMAND "${TESSERA}" train ${common} --stop-at 4 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "stopped after step 4 of 8" OR NOT EXISTS "${WORK}/ckpt/checkpoint.json")
  message(FATAL_ERROR "tessera train --stop-at 4 --checkpoint: ${rc}\n${out}\n${err}")
endif()
execute_process(COMMAND "${TESSERA}" train ${common} --resume --profile "${WORK}/trace.json"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "resumed from .* after step 4" OR NOT out MATCHES "step 8/8"
   OR out MATCHES "step 4/8" OR NOT out MATCHES "profile: trace")
  message(FATAL_ERROR "tessera train --resume --profile: ${rc}\n${out}\n${err}")
endif()
file(STRINGS "${WORK}/gpt.csv" rows)
list(LENGTH rows n)
if(NOT n EQUAL 9 OR NOT EXISTS "${WORK}/gpt.svg" OR NOT EXISTS "${WORK}/trace.json" OR NOT EXISTS "${WORK}/trace.memory.svg")
  message(FATAL_ERROR "tessera train --metrics/--profile: ${n} lines in gpt.csv (expected a header and 8 steps) or a "
                      "missing file:\n${rows}")
endif()

# A flag the model does not act on, and --resume without a checkpoint: a message naming the flag.
foreach(case "--model;gpt2;--data;text:${WORK}/tiny.txt;--epochs;3|--epochs does not apply to --model gpt2"
             "--model;cnn;--layers;2|--layers does not apply to --model cnn"
             "--model;resnet50;--limit-train;10|--limit-train does not apply to --model resnet50"
             "--model;gpt2;--data;text:${WORK}/tiny.txt;--resume;--checkpoint;${WORK}/nothing|--resume: no checkpoint at")
  string(REPLACE "|" ";" parts "${case}")
  list(POP_BACK parts expect)
  execute_process(COMMAND "${TESSERA}" train ${parts} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${expect}")
    message(FATAL_ERROR "tessera train ${parts}: expected a failure saying '${expect}', got ${rc}:\n${out}\n${err}")
  endif()
endforeach()
