// testhook.cpp: storage for the test hooks (see testhook.hpp).
#include "runtime/testhook.hpp"

namespace goro::rt {

test_hooks testhooks;

}  // namespace goro::rt
