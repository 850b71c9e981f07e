// The sync library: Mutex and RwLock (sync/mutex.hpp), Semaphore, Once and Cell (and their blocking forms for
// plain threads). Scoped combinators only: no public lock or unlock.
#pragma once

#include "shoal/sync/event.hpp"
#include "shoal/sync/mutex.hpp"
#include "shoal/sync/semaphore.hpp"
#include "shoal/sync/sync_error.hpp"
#include "shoal/sync/cell.hpp"
#include "shoal/sync/once.hpp"
