// The capture's view of an op call (the compiler's tracer, src/compile/capture.h).
//
// Note [Trace records]: while the compiler captures a program, its thread is marked capturing, and
// every op call that records itself for autograd (record_op, record_inplace: Note [Autograd stage])
// reaches the tracer stage as a trace record too, whether or not grad mode is on or an input requires
// grad: the op, its tensor inputs, its outputs and the attributes its derivative would read. The ops
// without a derivative that the capture knows (comparisons, argmax, factories, random draws) record
// themselves only while capturing. The body of an op that records itself runs under a NoRecordScope,
// which also suppresses trace records: the op is one record, whatever it calls inside.
//
// A record is what the capture turns into a graph node; what it cannot see it refuses: a kernel slot
// that ran inside an op which made no record, or a host read of tensor data (item(), printing) while
// captured (Note [Capture provenance] in compile/capture.h).
#pragma once
#include <vector>

#include "ops/dispatch_depth.h"
#include "ops/table/op_table.h"
#include "tessera/tensor.h"

namespace tessera {

// True on a captured thread outside the body of an op that records itself.
inline bool capturing() { return detail::t_capturing && detail::t_trace_suppress == 0; }

// The defined tensors of `ts`, in order: the outputs a backward op's mask asked for, as its trace
// record lists them (the compiler's replay filters its results the same way).
inline std::vector<Tensor> defined_only(std::initializer_list<Tensor> ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts)
    if (t.defined()) out.push_back(t);
  return out;
}

namespace detail {
void trace_record(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                  const OpAttrs& attrs);
// What ends a graph at the program's level (outside every op), while captured: a host read of tensor
// data, a backward pass. `what` says which, for the break's message.
void trace_host_read(const char* what);
}  // namespace detail

}  // namespace tessera
