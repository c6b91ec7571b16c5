/* Workload for the agent's CUDA test: drives the driver API (the stand-in libcuda, or the real
 * one on a GPU machine) through allocations, VMM, an allocation that invalidates a stream
 * capture, graphs and injected failures, and prints what it did as JSON: the truth the agent's
 * metrics are compared with. Waits for a line on stdin before starting and before exiting.
 * Every failure family the agent counts gets failures either driver returns: allocations far beyond
 * any device's memory, a NULL graph instantiated and launched, an exec update with a graph of
 * another topology, an allocation inside a capture. The injected ones (VIGIL_FAKE_CUDA_FAIL) happen
 * on the stand-in only; the workload records what each call really returned and names results
 * with the driver's cuGetErrorName, so the comparison holds on both.
 * CUDA_WORKLOAD_DEVICE picks the device ordinal of the full script (default 0).
 *   cuda_workload              the full script above
 *   cuda_workload quick N      N allocations of 1 KiB and their frees, then exit at once (churn)
 *   cuda_workload burst N      after a stdin line, N failing cuMemAlloc_v2 calls as fast as
 *                              possible (a burst of failure events); prints the time taken
 *   cuda_workload threads T N  after a stdin line, T threads at once, each N cuMemAlloc_v2 of
 *                              mixed sizes freeing every other one; prints the totals as JSON
 *   cuda_workload hold N       after a stdin line, N cuMemAlloc_v2 of 256 bytes, all kept; prints
 *                              the totals as JSON; after the next line frees them all and prints
 *                              the frees; exits after a third (one process filling the agent's
 *                              table of live allocations)
 *   cuda_workload nodevice     after a stdin line, one call of each probed family on a machine
 *                              without a GPU (the real driver's cuInit fails with
 *                              CUDA_ERROR_NO_DEVICE, every later call with what the driver
 *                              returns then); prints the calls and results as JSON
 *   cuda_workload restart      after a stdin line, 10 cuMemAlloc_v2 of 1 MiB; prints the totals
 *                              as JSON; after the next line frees 5 of them and allocates 3 of
 *                              2 MiB, prints the totals again; exits after a third (an agent
 *                              restarted between the two steps must keep the first) */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ALLOCS 128
#define BEYOND_ANY_DEVICE (1ull << 50)
#define MAX_KEYS 64

struct counter {
	char key[96];
	long n;
};

static struct counter calls[MAX_KEYS], errors[MAX_KEYS];
static size_t sizes[MAX_ALLOCS];
static int nsizes;
static long long live_bytes, mapped, physical, reserved;
static long allocs_in_capture;
static int capturing;

static void bump(struct counter *c, const char *key)
{
	for (int i = 0; i < MAX_KEYS; i++) {
		if (!c[i].key[0])
			snprintf(c[i].key, sizeof(c[i].key), "%s", key);
		if (!strcmp(c[i].key, key)) {
			c[i].n++;
			return;
		}
	}
}

/* The driver's name of RC; CUDA_ERROR_<n> for one it has none for, as the agent writes it. */
static const char *result_name(CUresult rc)
{
	static char unnamed[32];
	const char *name = NULL;

	if (cuGetErrorName(rc, &name) == CUDA_SUCCESS && name)
		return name;
	snprintf(unnamed, sizeof(unnamed), "CUDA_ERROR_%d", (int)rc);
	return unnamed;
}

/* Records one call of FN with result RC: "fn" in calls, "fn/ERROR_NAME" in errors. */
static CUresult record(const char *fn, CUresult rc, int is_alloc)
{
	char key[96];

	bump(calls, fn);
	if (is_alloc && capturing)
		allocs_in_capture++;
	if (rc) {
		snprintf(key, sizeof(key), "%s/%s", fn, result_name(rc));
		bump(errors, key);
	}
	return rc;
}

static void allocated(size_t size)
{
	if (nsizes < MAX_ALLOCS)
		sizes[nsizes++] = size;
}

static void wait_line(void)
{
	char line[16];

	if (!fgets(line, sizeof(line), stdin))
		exit(1);
}

static void print_counters(const char *name, const struct counter *c)
{
	printf("\"%s\": {", name);
	for (int i = 0; i < MAX_KEYS && c[i].key[0]; i++)
		printf("%s\"%s\": %ld", i ? ", " : "", c[i].key, c[i].n);
	printf("}");
}

/* Ends the JSON record a mode has begun with the calls and errors counted, then waits for the
 * line that lets the workload exit. */
static int finish_record(void)
{
	print_counters("calls", calls);
	printf(", ");
	print_counters("errors", errors);
	printf("}\n");
	fflush(stdout);
	wait_line();
	return 0;
}

static int quick(int n)
{
	CUdeviceptr p;
	int ok = 0;

	for (int i = 0; i < n; i++)
		if (!cuMemAlloc(&p, 1024) && !cuMemFree(p))
			ok++;
	printf("pid=%d allocs=%d\n", getpid(), ok);
	return ok == n ? 0 : 1;
}

static int burst(long n)
{
	struct timespec a, b;
	CUdeviceptr p;
	long failed = 0;

	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	setenv("VIGIL_FAKE_CUDA_FAIL", "cuMemAlloc_v2=2", 1);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		if (cuMemAlloc(&p, 1 << 20) == CUDA_ERROR_OUT_OF_MEMORY)
			failed++;
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("failed=%ld seconds=%.3f\n", failed, (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	fflush(stdout);
	wait_line();
	return 0;
}

static int hold(long n)
{
	CUdeviceptr *p = calloc((size_t)n, sizeof(*p));
	long allocs = 0, frees = 0;

	if (!p)
		return 2;
	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	for (long i = 0; i < n; i++)
		if (!cuMemAlloc(&p[allocs], 256))
			allocs++;
	printf("{\"pid\": %d, \"allocs\": %ld, \"live_bytes\": %ld}\n", getpid(), allocs, allocs * 256);
	fflush(stdout);
	wait_line();
	for (long i = 0; i < allocs; i++)
		if (!cuMemFree(p[i]))
			frees++;
	printf("{\"frees\": %ld}\n", frees);
	fflush(stdout);
	wait_line();
	free(p);
	return 0;
}

static void print_account(long allocs, long frees, long long live)
{
	printf("{\"pid\": %d, \"allocs\": %ld, \"frees\": %ld, \"live_bytes\": %lld}\n", getpid(), allocs, frees, live);
	fflush(stdout);
}

static int restart(void)
{
	CUdeviceptr p[13];
	long allocs = 0, frees = 0;
	long long live = 0;

	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	for (int i = 0; i < 10; i++)
		if (!cuMemAlloc(&p[i], 1 << 20)) { allocs++; live += 1 << 20; }
	print_account(allocs, frees, live);
	wait_line();
	for (int i = 0; i < 5; i++)
		if (!cuMemFree(p[i])) { frees++; live -= 1 << 20; }
	for (int i = 10; i < 13; i++)
		if (!cuMemAlloc(&p[i], 2 << 20)) { allocs++; live += 2 << 20; }
	print_account(allocs, frees, live);
	wait_line();
	return 0;
}

struct thread_account {
	pthread_t thread;
	long iterations, allocs, small, frees;
	long long alloc_bytes, live_bytes;
};

static void *alloc_storm(void *arg)
{
	struct thread_account *t = arg;
	CUdeviceptr p;

	for (long i = 0; i < t->iterations; i++) {
		size_t size = (i % 3) ? 256 * (size_t)(i % 16 + 1) : (64u << 10) + (size_t)i;

		if (cuMemAlloc(&p, size))
			continue;
		t->allocs++;
		t->alloc_bytes += (long long)size;
		t->small += size <= 4096;
		if (i % 2 == 0 && !cuMemFree(p))
			t->frees++;
		else
			t->live_bytes += (long long)size; /* kept to the end: the agent's live bytes */
	}
	return NULL;
}

static int threads(int nthreads, long iterations)
{
	struct thread_account t[64] = { 0 };
	long allocs = 0, small = 0, frees = 0;
	long long alloc_bytes = 0, live = 0;

	if (nthreads < 1 || nthreads > 64)
		return 2;
	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	for (int i = 0; i < nthreads; i++) {
		t[i].iterations = iterations;
		pthread_create(&t[i].thread, NULL, alloc_storm, &t[i]);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i].thread, NULL);
		allocs += t[i].allocs;
		small += t[i].small;
		frees += t[i].frees;
		alloc_bytes += t[i].alloc_bytes;
		live += t[i].live_bytes;
	}
	printf("{\"pid\": %d, \"threads\": %d, \"allocs\": %ld, \"small_allocs\": %ld, \"alloc_bytes\": %lld, "
	       "\"frees\": %ld, \"live_bytes\": %lld}\n", getpid(), nthreads, allocs, small, alloc_bytes, frees, live);
	fflush(stdout);
	wait_line();
	return 0;
}

/* Every probed family once (allocations twice, one of them beyond any device), on the driver as
 * it stands: without a GPU each returns the driver's own error. Arguments the driver must reject
 * anyway (NULL graphs, stream 0, handle 0) keep the calls harmless should one be made with a GPU. */
static int nodevice(void)
{
	CUdeviceptr p = 0, va = 0;
	CUmemGenericAllocationHandle h = 0;
	CUmemAllocationProp prop;
	CUgraph graph = NULL;
	CUgraphExec exec = NULL;
	CUgraphExecUpdateResultInfo info;
	size_t pitch = 0;
	CUresult init;

	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	init = cuInit(0);
	record("cuMemAlloc_v2", cuMemAlloc(&p, 4096), 1);
	record("cuMemAlloc_v2", cuMemAlloc(&p, BEYOND_ANY_DEVICE), 1);
	record("cuMemAllocPitch_v2", cuMemAllocPitch(&p, &pitch, 1000, 64, 4), 1);
	record("cuMemAllocAsync", cuMemAllocAsync(&p, 8192, NULL), 1);
	record("cuMemAllocManaged", cuMemAllocManaged(&p, 1u << 20, CU_MEM_ATTACH_GLOBAL), 1);
	record("cuMemFree_v2", cuMemFree(0), 0);
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	record("cuMemAddressReserve", cuMemAddressReserve(&va, 2u << 20, 0, 0, 0), 0);
	record("cuMemCreate", cuMemCreate(&h, 2u << 20, &prop, 0), 1);
	record("cuMemMap", cuMemMap(va, 2u << 20, 0, h, 0), 0);
	record("cuStreamBeginCapture_v2", cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
	record("cuStreamEndCapture", cuStreamEndCapture(NULL, &graph), 0);
	record("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags(&exec, NULL, 0), 0);
	record("cuGraphLaunch", cuGraphLaunch(NULL, NULL), 0);
	record("cuGraphExecUpdate_v2", cuGraphExecUpdate(NULL, NULL, &info), 0);
	printf("{\"pid\": %d, \"cuInit\": \"%s\", ", getpid(), init ? result_name(init) : "CUDA_SUCCESS");
	return finish_record();
}

int main(int argc, char **argv)
{
	CUdeviceptr small[30], big[8], p, async_p, va;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	CUmemoryPool pool;
	CUmemGenericAllocationHandle h[2];
	CUmemAllocationProp prop;
	CUgraph graph = NULL, grown = NULL;
	CUgraphNode node;
	CUgraphExecUpdateResultInfo update;
	CUgraphExec exec = NULL, exec2 = NULL, none = NULL;
	size_t pitch = 0, sz;

	if (argc == 3 && !strcmp(argv[1], "quick"))
		return quick(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "burst"))
		return burst(atol(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "hold"))
		return hold(atol(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "restart"))
		return restart();
	if (argc == 2 && !strcmp(argv[1], "nodevice"))
		return nodevice();
	if (argc == 4 && !strcmp(argv[1], "threads"))
		return threads(atoi(argv[2]), atol(argv[3]));
	if (argc != 1)
		return 2;
	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	const char *ordinal = getenv("CUDA_WORKLOAD_DEVICE");
	if (cuInit(0) || cuDeviceGet(&dev, ordinal ? atoi(ordinal) : 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
	    cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) || cuDeviceGetDefaultMemPool(&pool, dev))
		return 1;

	for (int i = 0; i < 30; i++) { /* small: 256 B .. 4 KiB */
		sz = 256 * (size_t)(i % 16 + 1);
		if (!record("cuMemAlloc_v2", cuMemAlloc(&small[i], sz), 1)) { allocated(sz); live_bytes += sz; }
	}
	for (int i = 0; i < 8; i++) { /* large: just over 1 MiB */
		sz = (1u << 20) + 4096 * (size_t)i;
		if (!record("cuMemAlloc_v2", cuMemAlloc(&big[i], sz), 1)) { allocated(sz); live_bytes += sz; }
	}
	if (!record("cuMemAllocPitch_v2", cuMemAllocPitch(&p, &pitch, 1000, 64, 4), 1)) {
		allocated(pitch * 64);
		live_bytes += (long long)(pitch * 64);
	}
	if (!record("cuMemAllocAsync", cuMemAllocAsync(&async_p, 8192, stream), 1)) { allocated(8192); live_bytes += 8192; }
	if (!record("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync(&p, 100, pool, stream), 1)) { allocated(100); live_bytes += 100; }
	if (!record("cuMemAllocManaged", cuMemAllocManaged(&p, 3u << 20, CU_MEM_ATTACH_GLOBAL), 1)) { allocated(3u << 20); live_bytes += 3 << 20; }
	for (int i = 0; i < 10; i++)
		if (!record("cuMemFree_v2", cuMemFree(small[i]), 0))
			live_bytes -= 256 * (i % 16 + 1);
	if (!record("cuMemFreeAsync", cuMemFreeAsync(async_p, stream), 0))
		live_bytes -= 8192;
	cuStreamSynchronize(stream);

	/* 1 PiB: more than any device has, and more address space than a managed allocation can take.
	 * Should one succeed all the same, it is counted as the allocation it is. */
	for (int i = 0; i < 2; i++)
		if (!record("cuMemAlloc_v2", cuMemAlloc(&p, BEYOND_ANY_DEVICE), 1)) { allocated(BEYOND_ANY_DEVICE); live_bytes += BEYOND_ANY_DEVICE; }
	if (!record("cuMemAllocManaged", cuMemAllocManaged(&p, BEYOND_ANY_DEVICE, CU_MEM_ATTACH_GLOBAL), 1)) {
		allocated(BEYOND_ANY_DEVICE);
		live_bytes += BEYOND_ANY_DEVICE;
	}

	/* Virtual memory management, as PyTorch's expandable segments use it. */
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	if (!record("cuMemAddressReserve", cuMemAddressReserve(&va, 64u << 20, 0, 0, 0), 0))
		reserved += 64 << 20;
	for (int i = 0; i < 2; i++)
		if (!record("cuMemCreate", cuMemCreate(&h[i], 2u << 20, &prop, 0), 1)) { allocated(2u << 20); physical += 2 << 20; }
	for (int i = 0; i < 2; i++)
		if (!record("cuMemMap", cuMemMap(va + (CUdeviceptr)i * (2u << 20), 2u << 20, 0, h[i], 0), 0))
			mapped += 2 << 20;
	if (!record("cuMemUnmap", cuMemUnmap(va + (2u << 20), 2u << 20), 0))
		mapped -= 2 << 20;
	if (!record("cuMemRelease", cuMemRelease(h[1]), 0))
		physical -= 2 << 20;

	/* An allocation inside a capture: the allocation fails and the capture is invalidated. */
	if (!record("cuStreamBeginCapture_v2", cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), 0))
		capturing = 1;
	record("cuMemAlloc_v2", cuMemAlloc(&p, 4096), 1);
	record("cuStreamEndCapture", cuStreamEndCapture(stream, &graph), 0);
	capturing = 0;

	/* A good capture, its graph, launches and failures. */
	if (!record("cuStreamBeginCapture_v2", cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), 0))
		capturing = 1;
	record("cuStreamEndCapture", cuStreamEndCapture(stream, &graph), 0);
	capturing = 0;
	record("cuGraphInstantiate", cuGraphInstantiate(&exec, graph, 0), 0);
	/* The same graph with one node more: an update of the executable graph to it must fail. */
	if (cuGraphCreate(&grown, 0) || cuGraphAddEmptyNode(&node, grown, NULL, 0))
		return 1;
	record("cuGraphInstantiate", cuGraphInstantiate(&exec2, NULL, 0), 0);
	record("cuGraphInstantiate", cuGraphInstantiateWithParams(&exec2, graph, NULL), 0);
	for (int i = 0; i < 5; i++)
		record("cuGraphLaunch", cuGraphLaunch(exec, stream), 0);
	setenv("VIGIL_FAKE_CUDA_FAIL", "cuGraphLaunch=719", 1);
	record("cuGraphLaunch", cuGraphLaunch(exec, stream), 0);
	record("cuGraphLaunch", cuGraphLaunch(exec, stream), 0);
	unsetenv("VIGIL_FAKE_CUDA_FAIL");
	record("cuGraphExecUpdate_v2", cuGraphExecUpdate(exec, grown, &update), 0);
	record("cuGraphExecUpdate_v2", cuGraphExecUpdate(exec, graph, &update), 0);
	record("cuGraphLaunch", cuGraphLaunch(none, stream), 0);

	printf("{\"pid\": %d, \"device\": %d, \"stream\": \"0x%llx\", \"live_bytes\": %lld, \"vmm_mapped_bytes\": %lld, "
	       "\"vmm_physical_bytes\": %lld, \"vmm_reserved_bytes\": %lld, \"allocs_in_capture\": %ld, \"sizes\": [",
	       getpid(), (int)dev, (unsigned long long)(uintptr_t)stream, live_bytes, mapped, physical, reserved, allocs_in_capture);
	for (int i = 0; i < nsizes; i++)
		printf("%s%zu", i ? ", " : "", sizes[i]);
	printf("], ");
	return finish_record();
}
