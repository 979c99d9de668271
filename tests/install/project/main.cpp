// Uses the installed headers and library: builds a tensor, views it, prints a number.
#include <iostream>

#include <tessera/tessera.h>

int main() {
  tessera::Tensor t = tessera::arange(6).view({2, 3});
  std::cout << "tessera ok " << t.numel() << " " << t.t().sizes().size() << "\n";
  return t.t().size(0) == 3 ? 0 : 1;
}
