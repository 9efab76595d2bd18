// goro: Go's G-M-P runtime scheduler as a C++20 library. Umbrella header.
#pragma once

#include <goro/bufio.hpp>
#include <goro/chan.hpp>
#include <goro/context.hpp>
#include <goro/debug.hpp>
#include <goro/defer.hpp>
#include <goro/errgroup.hpp>
#include <goro/fd.hpp>
#include <goro/net.hpp>
#include <goro/pool.hpp>
#include <goro/runtime.hpp>
#include <goro/select.hpp>
#include <goro/stats.hpp>
#include <goro/sync.hpp>
#include <goro/time.hpp>
#include <goro/trace.hpp>
#include <goro/wait_group.hpp>
