// Datasets, as torch.utils.data's map-style Dataset: a size and a way to get example i. An Example is a
// short list of tensors in a fixed order, by convention (data, target); a batch is an Example too, each
// tensor with a leading batch dimension. Two-tensor examples unpack with structured bindings:
// `auto& [x, y] = example;` (binding an example of any other length raises ValueError).
//
// Invariants: get() and get_batch() are const and may be called from several loader threads at once,
// so a dataset must not mutate itself in them. Indices given by the DataLoader are always in
// [0, size()); get() also accepts negative indices counted from the end, as Python's indexing does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/tensor.h"

namespace tessera::data {

class Example {
 public:
  Example() = default;
  Example(std::initializer_list<Tensor> tensors) : tensors_(tensors) {}
  explicit Example(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {}

  size_t size() const { return tensors_.size(); }
  bool empty() const { return tensors_.empty(); }
  // Checked access: raises IndexError past the end.
  Tensor& operator[](size_t i);
  const Tensor& operator[](size_t i) const;
  // The (data, target) convention: tensor 0 and tensor 1.
  Tensor& data() { return (*this)[0]; }
  const Tensor& data() const { return (*this)[0]; }
  Tensor& target() { return (*this)[1]; }
  const Tensor& target() const { return (*this)[1]; }
  void push_back(Tensor t) { tensors_.push_back(std::move(t)); }
  std::vector<Tensor>& tensors() { return tensors_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  auto begin() { return tensors_.begin(); }
  auto end() { return tensors_.end(); }
  auto begin() const { return tensors_.begin(); }
  auto end() const { return tensors_.end(); }

  // The tuple protocol behind `auto& [x, y] = example`: only two-tensor examples unpack.
  template <size_t I>
  Tensor& get() & {
    static_assert(I < 2);
    check_pair();
    return tensors_[I];
  }
  template <size_t I>
  const Tensor& get() const& {
    static_assert(I < 2);
    check_pair();
    return tensors_[I];
  }
  template <size_t I>
  Tensor&& get() && {
    static_assert(I < 2);
    check_pair();
    return std::move(tensors_[I]);
  }

 private:
  void check_pair() const;
  std::vector<Tensor> tensors_;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // A whole batch at once, laid out exactly as the default collate would stack get(i) for each of
  // `indices` (a 1-D int64 tensor). Datasets held in memory as tensors override this to gather rows
  // with one index_select per tensor; the default returns nullopt and the DataLoader stacks get(i).
  // The DataLoader asks for it only when no custom collate is set.
  virtual std::optional<Example> get_batch(const Tensor& indices) const;
};

// Tensors sharing their first dimension; example i is (t0[i], t1[i], ...), views of the tensors.
class TensorDataset : public Dataset {
 public:
  TensorDataset(std::initializer_list<Tensor> tensors) : TensorDataset(std::vector<Tensor>(tensors)) {}
  explicit TensorDataset(std::vector<Tensor> tensors);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  std::optional<Example> get_batch(const Tensor& indices) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

// Wraps a possibly negative index into [0, size); raises IndexError naming `dataset` when out of range.
int64_t wrap_index(int64_t index, int64_t size, const char* dataset);

}  // namespace tessera::data

template <>
struct std::tuple_size<tessera::data::Example> : std::integral_constant<size_t, 2> {};
template <size_t I>
struct std::tuple_element<I, tessera::data::Example> {
  using type = tessera::Tensor;
};
