// The sync library: Mutex, RwLock, Semaphore (and their blocking forms for
// plain threads). Scoped combinators only: no public lock or unlock.
#pragma once

#include "shoal/sync/mutex.hpp"
#include "shoal/sync/semaphore.hpp"
#include "shoal/sync/sync_error.hpp"
