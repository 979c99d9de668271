// Program <-> JSON, and the inputs a program's steps describe (see program.h).
#include "programs/program.h"

#include <fstream>
#include <sstream>

#include "common/test_util.h"

namespace tessera::programs {
namespace {

DType dtype_from(const std::string& s) {
  for (DType d : testing::all_dtypes())
    if (s == dtype_name(d)) return d;
  TS_CHECK(false, ValueError, "random program: unknown dtype '", s, "'");
  return kFloat32;
}

Layout layout_from(const std::string& s) {
  if (s == "contiguous") return Layout::Contiguous;
  if (s == "transposed") return Layout::Transposed;
  if (s == "sliced") return Layout::Sliced;
  TS_CHECK(false, ValueError, "random program: unknown layout '", s, "' (contiguous, transposed or sliced)");
  return Layout::Contiguous;
}

InputKind kind_from(const std::string& s) {
  if (s == "normal") return InputKind::Normal;
  if (s == "int") return InputKind::Int;
  if (s == "bool") return InputKind::Bool;
  TS_CHECK(false, ValueError, "random program: unknown input kind '", s, "' (normal, int or bool)");
  return InputKind::Normal;
}

}  // namespace

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
  }
  return "?";
}

const char* kind_name(InputKind k) {
  switch (k) {
    case InputKind::Normal: return "normal";
    case InputKind::Int: return "int";
    case InputKind::Bool: return "bool";
  }
  return "?";
}

Json to_json(const Program& p) {
  Json steps = Json::array();
  for (const Step& s : p.steps) {
    Json j = {{"op", s.op}};
    if (s.op == "input") {
      j["shape"] = std::vector<int64_t>(s.shape.begin(), s.shape.end());
      j["dtype"] = dtype_name(s.dtype);
      j["kind"] = kind_name(s.kind);
      if (s.kind == InputKind::Int) {
        j["lo"] = s.lo;
        j["hi"] = s.hi;
      }
      j["layout"] = layout_name(s.layout);
      j["requires_grad"] = s.requires_grad;
      j["seed"] = s.seed;
    } else {
      j["in"] = s.in;
      if (!s.attrs.empty()) j["attrs"] = s.attrs;
    }
    steps.push_back(std::move(j));
  }
  Json j = {{"format", "tessera-random-program/1"}, {"seed", p.seed}, {"dtype", dtype_name(p.dtype)},
            {"steps", steps}, {"outputs", p.outputs}};
  if (!p.note.empty()) j["note"] = p.note;
  return j;
}

Program from_json(const Json& j) {
  TS_CHECK(j.is_object() && j.value("format", "") == "tessera-random-program/1", ValueError,
           "random program: expected an object with \"format\": \"tessera-random-program/1\"");
  Program p;
  p.seed = j.at("seed").get<uint64_t>();
  p.dtype = dtype_from(j.at("dtype").get<std::string>());
  p.note = j.value("note", "");
  for (const Json& js : j.at("steps")) {
    Step s;
    s.op = js.at("op").get<std::string>();
    if (s.op == "input") {
      std::vector<int64_t> shape = js.at("shape").get<std::vector<int64_t>>();
      s.shape = Shape(shape.begin(), shape.end());
      s.dtype = dtype_from(js.at("dtype").get<std::string>());
      s.kind = kind_from(js.at("kind").get<std::string>());
      s.lo = js.value("lo", int64_t{-5});
      s.hi = js.value("hi", int64_t{5});
      s.layout = layout_from(js.at("layout").get<std::string>());
      s.requires_grad = js.at("requires_grad").get<bool>();
      s.seed = js.at("seed").get<uint64_t>();
    } else {
      s.in = js.at("in").get<std::vector<int>>();
      if (js.contains("attrs")) s.attrs = js.at("attrs");
      const int self = static_cast<int>(p.steps.size());
      for (int i : s.in)
        TS_CHECK(i >= 0 && i < self, ValueError, "random program: step ", self, " (", s.op, ") reads step ", i,
                 ", which is not an earlier step");
    }
    p.steps.push_back(std::move(s));
  }
  p.outputs = j.at("outputs").get<std::vector<int>>();
  for (int o : p.outputs)
    TS_CHECK(o >= 0 && o < static_cast<int>(p.steps.size()), ValueError, "random program: output ", o,
             " is not a step (", p.steps.size(), " steps)");
  return p;
}

Program load_program(const std::string& path) {
  std::ifstream f(path);
  TS_CHECK(f.good(), IOError, "random program: cannot open '", path, "'");
  Json j;
  try {
    j = Json::parse(f);
  } catch (const Json::exception& e) {
    TS_CHECK(false, IOError, "random program: '", path, "' is not JSON: ", e.what());
  }
  return from_json(j);
}

void save_program(const Program& p, const std::string& path) {
  std::ofstream f(path);
  TS_CHECK(f.good(), IOError, "random program: cannot write '", path, "'");
  f << to_json(p).dump(1) << "\n";
  TS_CHECK(f.good(), IOError, "random program: writing '", path, "' failed");
}

Tensor input_values(const Step& s) {
  switch (s.kind) {
    case InputKind::Normal: return testing::test_data(s.shape, s.dtype, s.seed);
    case InputKind::Int: return testing::test_data(s.shape, kInt64, s.seed, static_cast<double>(s.lo),
                                                   static_cast<double>(s.hi)).to(s.dtype);
    case InputKind::Bool: return testing::test_data(s.shape, kBool, s.seed);
  }
  return Tensor();
}

Tensor materialize_input(const Step& s, Device device) {
  Tensor v = input_values(s).to(device);
  Tensor t;
  switch (s.layout) {
    case Layout::Contiguous: t = v; break;
    case Layout::Transposed:
      TS_CHECK(v.dim() >= 2, ValueError, "random program: a transposed input needs two dims, got ", v.dim());
      t = v.transpose(-1, -2).contiguous().transpose(-1, -2);
      break;
    case Layout::Sliced: {
      TS_CHECK(v.dim() >= 1, ValueError, "random program: a sliced input needs a dim");
      Shape big = v.sizes();
      big.back() *= 2;
      Tensor buf = zeros(big, {v.dtype(), device});
      t = buf.slice(-1, 0, std::nullopt, 2);
      t.copy_(v);
      break;
    }
  }
  t = t.detach();
  if (s.requires_grad) t.requires_grad_(true);
  return t;
}

std::string summary(const Program& p) {
  std::ostringstream o;
  o << "seed " << p.seed << ", " << dtype_name(p.dtype) << ":";
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    o << " %" << i << "=";
    if (s.op == "input") {
      o << "input" << s.shape << "/" << layout_name(s.layout);
    } else {
      o << s.op << "(";
      for (size_t k = 0; k < s.in.size(); ++k) o << (k ? "," : "") << "%" << s.in[k];
      if (!s.attrs.empty()) o << (s.in.empty() ? "" : ",") << s.attrs.dump();
      o << ")";
    }
    o << ";";
  }
  return o.str();
}

}  // namespace tessera::programs
