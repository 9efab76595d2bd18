// schedtrace.hpp: GORO_DEBUG=schedtrace/scheddetail output (schedtrace.cpp).
#pragma once

namespace goro::rt {

void schedtrace(bool detailed);

}  // namespace goro::rt
