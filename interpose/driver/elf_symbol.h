// Looks up a function in one loaded object's dynamic symbol table without calling dlsym.
#pragma once

namespace kvremap::interpose {

// The default-version definition of `symbol` in the first loaded object whose path contains
// `object` (e.g. "libc.so.6"), or nullptr. Needed because this library exports dlsym itself, so
// calling dlsym from inside it would reach our own hook.
void* find_symbol_in_object(const char* object, const char* symbol);

}  // namespace kvremap::interpose
