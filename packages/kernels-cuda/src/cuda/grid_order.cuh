// Programmatic dependent launch (sm_90+): a grid launched to overlap the one ahead of it on the
// stream (CudaContext.launchOverlapping) may start while that one runs. Elsewhere both are no-ops.
#pragma once

namespace kvkit {

// Waits until the grid ahead has finished and its writes are visible: before any global access that
// could touch what it reads or writes.
__device__ __forceinline__ void waitForPreviousGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the grid behind this one launch now (it still waits for this one before touching memory).
__device__ __forceinline__ void letNextGridLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

}  // namespace kvkit
