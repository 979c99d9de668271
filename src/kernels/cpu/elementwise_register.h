// Registration of the elementwise family's CPU kernel files; register_elementwise() calls them all.
#pragma once

namespace tessera::cpu {

void register_unary();
void register_binary();
void register_ternary();
void register_softmax();

}  // namespace tessera::cpu
