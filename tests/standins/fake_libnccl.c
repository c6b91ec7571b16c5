/* Stand-in libnccl.so.2 for the agent's communicator tests on machines without GPUs: the real
 * entry points (names and signatures from the toolkit's nccl.h, which this file is compiled
 * against, so ncclUniqueId is passed by value with its real 128-byte layout) and, behind them,
 * what the agent's communicator view depends on: every rank initialised with one unique id joins
 * one communicator, and a collective completes only when every rank of it has entered it. The
 * ranks are processes; a communicator is a barrier in shared memory named after its id
 * (/dev/shm/vigil-fake-nccl-<first 8 id bytes in hex>). No data moves. */
#include <nccl.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default"), noinline))

/* Shared by the ranks: how many entered the current collective, and how many completed. */
struct barrier {
	atomic_ullong arrived;
	atomic_ullong generation;
};

struct ncclComm {
	int rank, nranks;
	char path[64];
	struct barrier *shared;
};

/* Waits until all ranks have entered; the last to arrive releases the others. */
static ncclResult_t barrier_wait(struct ncclComm *c)
{
	unsigned long long gen = atomic_load(&c->shared->generation);

	if (atomic_fetch_add(&c->shared->arrived, 1) + 1 == (unsigned long long)c->nranks) {
		atomic_store(&c->shared->arrived, 0);
		atomic_fetch_add(&c->shared->generation, 1);
		return ncclSuccess;
	}
	while (atomic_load(&c->shared->generation) == gen)
		usleep(200);
	return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	if (!uniqueId)
		return ncclInvalidArgument;
	if (getrandom(uniqueId->internal, sizeof(uniqueId->internal), 0) != (ssize_t)sizeof(uniqueId->internal))
		return ncclSystemError;
	return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank)
{
	struct ncclComm *c;
	int fd;

	if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->rank = rank;
	c->nranks = nranks;
	snprintf(c->path, sizeof(c->path), "/dev/shm/vigil-fake-nccl-");
	for (int i = 0; i < 8; i++)
		snprintf(c->path + strlen(c->path), 3, "%02x", (unsigned char)id->internal[i]);
	fd = open(c->path, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct barrier))) {
		if (fd >= 0)
			close(fd);
		free(c);
		return ncclSystemError;
	}
	c->shared = mmap(NULL, sizeof(struct barrier), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (c->shared == MAP_FAILED) {
		free(c);
		return ncclSystemError;
	}
	*comm = c;
	return barrier_wait(c); /* like NCCL's, init returns once every rank has joined */
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return init_rank(comm, nranks, &commId, rank);
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
					   ncclConfig_t *config)
{
	if (!config)
		return ncclInvalidArgument;
	return init_rank(comm, nranks, &commId, rank);
}

/* One process cannot be several ranks of a barrier that spins: not modelled. */
EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	(void)comms, (void)ndev, (void)devlist;
	return ncclInvalidUsage;
}

static ncclResult_t collective(ncclComm_t comm)
{
	return comm ? barrier_wait(comm) : ncclInvalidArgument;
}

EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)stream;
	return collective(comm);
}

EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
				  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)sendcount, (void)datatype, (void)stream;
	return collective(comm);
}

EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)recvcount, (void)datatype, (void)op, (void)stream;
	return collective(comm);
}

EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				  int root, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)root, (void)stream;
	return collective(comm);
}

EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)recvbuff, (void)count, (void)datatype, (void)op, (void)root, (void)stream;
	return collective(comm);
}

/* Point-to-point is not part of the communicator view: accepted, not modelled. */
EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
			     ncclComm_t comm, cudaStream_t stream)
{
	(void)sendbuff, (void)count, (void)datatype, (void)peer, (void)stream;
	return comm ? ncclSuccess : ncclInvalidArgument;
}

EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			     cudaStream_t stream)
{
	(void)recvbuff, (void)count, (void)datatype, (void)peer, (void)stream;
	return comm ? ncclSuccess : ncclInvalidArgument;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!comm || !asyncError)
		return ncclInvalidArgument;
	*asyncError = ncclSuccess;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return ncclInvalidArgument;
	munmap(comm->shared, sizeof(struct barrier));
	unlink(comm->path); /* the first rank to leave removes the name; the others keep their mapping */
	free(comm);
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	return ncclCommDestroy(comm);
}
