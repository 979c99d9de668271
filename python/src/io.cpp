// tessera._C._io and _data: safetensors save/load (the files PyTorch's safetensors reads), and the
// C++ datasets and DataLoader. Iterating a DataLoader builds each batch with the GIL released (Note
// [GIL release] in tensor.cpp): its workers are C++ threads that never need the interpreter.
#include "bindings.h"

namespace tessera::python {
namespace {

py::tuple example_tuple(const data::Example& e) {
  py::tuple t(e.size());
  for (size_t i = 0; i < e.size(); ++i) t[i] = py::cast(e[i]);
  return t;
}

// One epoch of a DataLoader: Python's iterator protocol over DataLoader::Iterator.
struct EpochIterator {
  std::shared_ptr<data::DataLoader> loader;
  data::DataLoader::Iterator it;
  bool first = true;
};

}  // namespace

void init_io(py::module_& m) {
  py::module_ io = m.def_submodule("_io", "safetensors");
  io.def("save_file", [](const std::map<std::string, Tensor>& tensors, const std::string& path,
                         std::optional<std::map<std::string, std::string>> metadata) {
    py::gil_scoped_release r;
    save_safetensors(tensors, path, metadata.value_or(std::map<std::string, std::string>{}));
  }, py::arg("tensors"), py::arg("filename"), py::arg("metadata") = py::none());
  io.def("load_file", [](const std::string& path, py::object device) {
    std::map<std::string, Tensor> r;
    {
      py::gil_scoped_release rel;
      r = load_safetensors(path);
    }
    if (!device.is_none()) {
      Device d = device_from_object(device, "load_file");
      for (auto& [k, v] : r) v = v.to(d);
    }
    return r;
  }, py::arg("filename"), py::arg("device") = py::none());

  py::module_ dm = m.def_submodule("_data", "datasets and the DataLoader");
  py::class_<data::Dataset, std::shared_ptr<data::Dataset>>(dm, "Dataset")
      .def("__len__", &data::Dataset::size)
      .def("__getitem__", [](const data::Dataset& d, int64_t i) {
        if (i < 0) i += d.size();
        if (i < 0 || i >= d.size()) throw py::index_error("dataset index " + std::to_string(i) + " out of range");
        return example_tuple(d.get(i));
      });
  py::class_<data::TensorDataset, data::Dataset, std::shared_ptr<data::TensorDataset>>(dm, "TensorDataset")
      .def(py::init([](py::args tensors) {
        std::vector<Tensor> ts;
        for (auto t : tensors) ts.push_back(t.cast<Tensor>());
        return std::make_shared<data::TensorDataset>(std::move(ts));
      }));
  py::class_<data::FashionMNIST, data::Dataset, std::shared_ptr<data::FashionMNIST>>(dm, "FashionMNIST")
      .def(py::init([](const std::string& root, bool train, bool normalize) {
        py::gil_scoped_release r;
        return std::make_shared<data::FashionMNIST>(root, train ? data::Split::Train : data::Split::Test,
                                                    normalize ? std::optional<data::Normalize>(data::FashionMNIST::kNormalize)
                                                              : std::nullopt);
      }), py::arg("root") = data::FashionMNIST::kDefaultRoot, py::arg("train") = true, py::arg("normalize") = true)
      .def_property_readonly("data", &data::FashionMNIST::images)
      .def_property_readonly("targets", &data::FashionMNIST::labels);

  py::class_<data::DataLoader, std::shared_ptr<data::DataLoader>>(dm, "DataLoader")
      .def(py::init([](std::shared_ptr<data::Dataset> ds, int64_t batch_size, bool shuffle, int64_t num_workers,
                       bool drop_last, bool pin_memory, std::optional<uint64_t> seed) {
        data::DataLoaderOptions o;
        o.batch_size = batch_size; o.shuffle = shuffle; o.num_workers = num_workers; o.drop_last = drop_last;
        o.pin_memory = pin_memory; o.seed = seed;
        return std::make_shared<data::DataLoader>(std::shared_ptr<const data::Dataset>(ds), o);
      }), py::arg("dataset"), py::arg("batch_size") = 1, py::arg("shuffle") = false, py::arg("num_workers") = 0,
         py::arg("drop_last") = false, py::arg("pin_memory") = false, py::arg("seed") = py::none())
      .def("__len__", &data::DataLoader::size)
      .def("__iter__", [](std::shared_ptr<data::DataLoader> self) {
        auto* e = new EpochIterator{self, {}, true};
        {
          py::gil_scoped_release r;
          e->it = self->begin();
        }
        return e;
      }, py::return_value_policy::take_ownership);
  py::class_<EpochIterator>(dm, "_EpochIterator")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](EpochIterator& e) {
        if (!e.first) {
          py::gil_scoped_release r;
          ++e.it;
        }
        e.first = false;
        if (e.it == e.loader->end()) throw py::stop_iteration();
        return example_tuple(*e.it);
      });
}

}  // namespace tessera::python
