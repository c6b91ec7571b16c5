/* Workload for the agent's NCCL test, linked against the real libnccl.so.2: on a machine without
 * a GPU ncclGetUniqueId succeeds and ncclCommInitRank fails; collectives on no communicator fail
 * at enqueue. Prints each call's result as JSON (the truth); waits for stdin lines to start and
 * to exit. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NAME(x) case x: return #x
static const char *result_name(ncclResult_t rc)
{
	switch (rc) {
	NAME(ncclSuccess);
	NAME(ncclUnhandledCudaError);
	NAME(ncclSystemError);
	NAME(ncclInternalError);
	NAME(ncclInvalidArgument);
	NAME(ncclInvalidUsage);
	NAME(ncclRemoteError);
	NAME(ncclInProgress);
	default: return "unexpected";
	}
}

static int first = 1;

static void report(const char *fn, ncclResult_t rc)
{
	printf("%s\"%s/%s\": 1", first ? "" : ", ", fn, result_name(rc));
	first = 0;
}

static void wait_line(void)
{
	char line[16];

	if (!fgets(line, sizeof(line), stdin))
		_exit(1);
}

int main(void)
{
	ncclUniqueId id;
	ncclComm_t comm = NULL;
	ncclResult_t rc;

	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	wait_line();
	memset(&id, 0, sizeof(id));
	rc = ncclGetUniqueId(&id);
	printf("{\"pid\": %d, \"calls\": {", getpid());
	report("ncclGetUniqueId", rc);
	report("ncclCommInitRank", ncclCommInitRank(&comm, 1, id, 0));
	report("ncclAllReduce", ncclAllReduce(NULL, NULL, 1024, ncclFloat32, ncclSum, NULL, NULL));
	printf("}}\n");
	fflush(stdout);
	wait_line();
	return 0;
}
