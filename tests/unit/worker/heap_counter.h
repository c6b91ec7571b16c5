// Counts every operator new of the test binary that links heap_counter.cpp, so a test can prove
// a code path allocates nothing on the heap.
#pragma once

namespace vigil::test {

long heap_allocations();

}  // namespace vigil::test
