// shoal: structured concurrency for C++20. One include for the whole API.
#pragma once

#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/run.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/scope/timeout.hpp"
#include "shoal/time/sleep.hpp"
#include "shoal/channel/channel.hpp"
#include "shoal/scope/combinators.hpp"
#include "shoal/scope/task_set.hpp"
#include "shoal/runtime/spawn_blocking.hpp"
#include "shoal/net/address.hpp"
#include "shoal/net/stream.hpp"
#include "shoal/net/serve.hpp"
#include "shoal/signal/signal.hpp"
#include "shoal/process/process.hpp"
