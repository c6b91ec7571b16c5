/* Stand-in libcuda.so.1 for the agent's tests on machines without a GPU: the real driver entry
 * points (names and signatures from the toolkit's cuda.h, which this file is compiled against)
 * with host memory behind them. It keeps the driver's capture rule: an allocation during a
 * stream capture fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture.
 * Like the driver, it fails an allocation larger than the device's memory (DEVICE_BYTES here),
 * a graph call on a NULL handle, and an exec update whose graph has a different node count.
 * Failures are injected per call through the environment, read at every call:
 *   VIGIL_FAKE_CUDA_FAIL=cuMemAlloc_v2=2,cuGraphLaunch=719   (symbol=CUresult) */
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default"), noinline))

#define DEVICE_BYTES (80ull << 30) /* an 80 GiB device */

/* A graph and an executable graph: their node count, what an exec update compares. */
struct fake_graph {
	int nodes;
};

static CUstream capturing_stream;
static int capturing, capture_invalidated;
static uint64_t next_va = 0x7f0000000000ull;

/* The result injected for SYMBOL, or CUDA_SUCCESS. */
static CUresult injected(const char *symbol)
{
	const char *spec = getenv("VIGIL_FAKE_CUDA_FAIL");
	size_t n = strlen(symbol);

	while (spec && *spec) {
		if (!strncmp(spec, symbol, n) && spec[n] == '=')
			return (CUresult)atoi(spec + n + 1);
		spec = strchr(spec, ',');
		if (spec)
			spec++;
	}
	return CUDA_SUCCESS;
}

static CUresult host_alloc(const char *symbol, CUdeviceptr *dptr, size_t size)
{
	CUresult rc = injected(symbol);
	void *p;

	if (rc)
		return rc;
	if (capturing) {
		capture_invalidated = 1;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (!dptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (size > DEVICE_BYTES)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p = malloc(size);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* Set-up calls a workload makes on the real driver, so one workload runs on both. */
EXPORT CUresult cuInit(unsigned int Flags) { (void)Flags; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) { *device = ordinal; return CUDA_SUCCESS; }
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	(void)dev;
	*pctx = (CUcontext)0xc0;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { (void)dev; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	(void)Flags;
	*phStream = (CUstream)0x5157;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamSynchronize(CUstream hStream) { (void)hStream; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	(void)dev;
	*pool_out = (CUmemoryPool)0x9001;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	return host_alloc("cuMemAlloc_v2", dptr, bytesize);
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
				unsigned int ElementSizeBytes)
{
	size_t pitch = (WidthInBytes + 511) / 512 * 512; /* the driver aligns rows */
	CUresult rc;

	(void)ElementSizeBytes;
	rc = host_alloc("cuMemAllocPitch_v2", dptr, pitch * Height);
	if (!rc)
		*pPitch = pitch;
	return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	(void)hStream;
	return host_alloc("cuMemAllocAsync", dptr, bytesize);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	(void)hStream;
	return host_alloc("cuMemAllocAsync_ptsz", dptr, bytesize);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	(void)pool;
	(void)hStream;
	return host_alloc("cuMemAllocFromPoolAsync", dptr, bytesize);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	(void)flags;
	return host_alloc("cuMemAllocManaged", dptr, bytesize);
}

EXPORT CUresult cuMemFree(CUdeviceptr dptr)
{
	CUresult rc = injected("cuMemFree_v2");

	if (!rc)
		free((void *)(uintptr_t)dptr);
	return rc;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	CUresult rc = injected("cuMemFreeAsync");

	(void)hStream;
	if (!rc)
		free((void *)(uintptr_t)dptr);
	return rc;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			    unsigned long long flags)
{
	CUresult rc = injected("cuMemCreate");
	void *p;

	(void)prop;
	(void)flags;
	if (rc)
		return rc;
	if (capturing) {
		capture_invalidated = 1;
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	p = malloc(size);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult rc = injected("cuMemRelease");

	if (!rc)
		free((void *)(uintptr_t)handle);
	return rc;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				    unsigned long long flags)
{
	CUresult rc = injected("cuMemAddressReserve");

	(void)alignment;
	(void)addr;
	(void)flags;
	if (rc)
		return rc;
	*ptr = next_va;
	next_va += (size + 0xfffff) & ~0xfffffull;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	(void)ptr;
	(void)size;
	return injected("cuMemAddressFree");
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			 unsigned long long flags)
{
	(void)ptr;
	(void)size;
	(void)offset;
	(void)flags;
	return handle ? injected("cuMemMap") : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	(void)ptr;
	(void)size;
	return injected("cuMemUnmap");
}

EXPORT CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode)
{
	CUresult rc = injected("cuStreamBeginCapture_v2");

	(void)mode;
	if (rc)
		return rc;
	if (capturing)
		return CUDA_ERROR_ILLEGAL_STATE;
	capturing = 1;
	capture_invalidated = 0;
	capturing_stream = hStream;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	CUresult rc = injected("cuStreamEndCapture");

	if (rc)
		return rc;
	if (!capturing || hStream != capturing_stream)
		return CUDA_ERROR_ILLEGAL_STATE;
	capturing = 0;
	if (capture_invalidated) {
		*phGraph = NULL;
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	*phGraph = (CUgraph)calloc(1, sizeof(struct fake_graph));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	(void)flags;
	*phGraph = (CUgraph)calloc(1, sizeof(struct fake_graph));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				    size_t numDependencies)
{
	(void)dependencies;
	(void)numDependencies;
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraphNode = (CUgraphNode)(uintptr_t)++((struct fake_graph *)hGraph)->nodes;
	return CUDA_SUCCESS;
}

/* An executable graph of HGRAPH: a copy of its node count. */
static CUgraphExec instantiate(CUgraph hGraph)
{
	struct fake_graph *exec = malloc(sizeof(*exec));

	*exec = *(struct fake_graph *)hGraph;
	return (CUgraphExec)exec;
}

EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	CUresult rc = injected("cuGraphInstantiateWithFlags");

	(void)flags;
	if (rc)
		return rc;
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraphExec = instantiate(hGraph);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
					     CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	CUresult rc = injected("cuGraphInstantiateWithParams");

	if (rc)
		return rc;
	if (!hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraphExec = instantiate(hGraph);
	if (instantiateParams)
		instantiateParams->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	CUresult rc = injected("cuGraphLaunch");

	(void)hStream;
	if (rc)
		return rc;
	return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

EXPORT CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
	CUresult rc = injected("cuGraphExecUpdate_v2");

	if (resultInfo)
		memset(resultInfo, 0, sizeof(*resultInfo));
	if (rc)
		return rc;
	if (!hGraphExec || !hGraph)
		return CUDA_ERROR_INVALID_VALUE;
	if (((struct fake_graph *)hGraphExec)->nodes != ((struct fake_graph *)hGraph)->nodes) {
		if (resultInfo)
			resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
		return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
	}
	return CUDA_SUCCESS;
}

#define NAME(x) \
	case x: \
		*pStr = #x; \
		return CUDA_SUCCESS
/* The names of the results this stand-in returns or a test injects. */
EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	switch (error) {
	NAME(CUDA_SUCCESS);
	NAME(CUDA_ERROR_INVALID_VALUE);
	NAME(CUDA_ERROR_OUT_OF_MEMORY);
	NAME(CUDA_ERROR_INVALID_HANDLE);
	NAME(CUDA_ERROR_ILLEGAL_STATE);
	NAME(CUDA_ERROR_LAUNCH_FAILED);
	NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	NAME(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
	default:
		*pStr = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
}
