/* Tensor parallelism on the device side: the communicator of one rank (one process, one GPU) and the two
 * collectives a step needs (engine/backend_tp.c runs the ranks): the all-reduce (sum) of each block's
 * partial output before the residual add, enqueued on the step's stream (so CUDA Graphs capture it), and a
 * blocking agreement (minimum of an int) that every rank reaches once per step before its first launch, so
 * that a step one rank cannot take (out of memory for its buffers) is refused by every rank and their
 * collectives stay paired.
 *
 * NCCL is opened at run time (dlopen libnccl.so.2, or $LLM_NCCL_LIB) only when a model is split, so the
 * backend loads and runs on one GPU where NCCL is not installed. Under the CPU emulation (CU_EMULATE) the
 * ranks are processes that meet in a POSIX shared-memory segment: each writes its buffer into its slot,
 * waits at a process-shared barrier, and sums the slots in rank order (so every rank gets the same bits,
 * as NCCL's all-reduce gives every rank the same result). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_internal.cuh"
#include "model_tp.h"

#ifndef CU_EMULATE
#include <nccl.h>

static struct {
    int tried, ok;
    decltype(&ncclGetUniqueId) get_id;
    decltype(&ncclCommInitRank) init_rank;
    decltype(&ncclAllReduce) all_reduce;
    decltype(&ncclCommDestroy) destroy;
    decltype(&ncclGetErrorString) errstr;
} nccl;

static int nccl_open(char *msg, size_t len)
{
    if (nccl.tried)
        return nccl.ok ? 0 : (snprintf(msg, len, "NCCL could not be loaded"), -1);
    nccl.tried = 1;
    const char *env = getenv("LLM_NCCL_LIB");
    void *h = dlopen(env != NULL && env[0] ? env : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(msg, len, "cannot load NCCL (%s; set LLM_NCCL_LIB to libnccl.so.2's path)", dlerror());
        return -1;
    }
    nccl.get_id = (decltype(nccl.get_id))dlsym(h, "ncclGetUniqueId");
    nccl.init_rank = (decltype(nccl.init_rank))dlsym(h, "ncclCommInitRank");
    nccl.all_reduce = (decltype(nccl.all_reduce))dlsym(h, "ncclAllReduce");
    nccl.destroy = (decltype(nccl.destroy))dlsym(h, "ncclCommDestroy");
    nccl.errstr = (decltype(nccl.errstr))dlsym(h, "ncclGetErrorString");
    if (!nccl.get_id || !nccl.init_rank || !nccl.all_reduce || !nccl.destroy || !nccl.errstr) {
        snprintf(msg, len, "NCCL library lacks the functions it should have");
        return -1;
    }
    nccl.ok = 1;
    return 0;
}

static int tp_make_id(unsigned char *id, int size, char *msg, size_t len)
{
    (void)size;
    ncclUniqueId u;
    if (nccl_open(msg, len) != 0)
        return -1;
    ncclResult_t r = nccl.get_id(&u);
    if (r != ncclSuccess) {
        snprintf(msg, len, "ncclGetUniqueId: %s", nccl.errstr(r));
        return -1;
    }
    static_assert(sizeof(u) == LLM_TP_ID_BYTES, "NCCL's id size");
    memcpy(id, &u, sizeof(u));
    return 0;
}

static int comm_init(cu_state *st, const unsigned char *id, llm_err *err)
{
    ncclUniqueId u;
    memcpy(&u, id, sizeof(u));
    if (nccl_open(err->msg, sizeof(err->msg)) != 0)
        return -1;
    ncclComm_t comm = NULL;
    ncclResult_t r = nccl.init_rank(&comm, st->tp.size, u, st->tp.rank);
    if (r != ncclSuccess) {
        llm_err_set(err, "cuda backend: ncclCommInitRank (rank %d of %d): %s", st->tp.rank, st->tp.size,
                    nccl.errstr(r));
        return -1;
    }
    st->tp.comm = comm;
    return 0;
}

static void comm_free(cu_state *st)
{
    if (st->tp.comm != NULL)
        nccl.destroy((ncclComm_t)st->tp.comm);
    st->tp.comm = NULL;
}

void cuda_tp_allreduce(cu_state *st, const float *send, float *recv, size_t n)
{
    /* a failure shows as the stream's error at the step's synchronisation */
    nccl.all_reduce(send, recv, n, ncclFloat32, ncclSum, (ncclComm_t)st->tp.comm, st->stream);
}

/* The agreement through NCCL: the flag goes up, is reduced on the device, and comes back (0 on any error). */
static int agree(cu_state *st, int v)
{
    int32_t h = v;
    if (cudaMemcpyAsync(st->tp.flag, &h, sizeof(h), cudaMemcpyHostToDevice, st->stream) != cudaSuccess ||
        nccl.all_reduce(st->tp.flag, st->tp.flag, 1, ncclInt32, ncclMin, (ncclComm_t)st->tp.comm, st->stream) !=
            ncclSuccess ||
        cudaMemcpyAsync(&h, st->tp.flag, sizeof(h), cudaMemcpyDeviceToHost, st->stream) != cudaSuccess ||
        cudaStreamSynchronize(st->stream) != cudaSuccess)
        return 0;
    return h;
}
#else
/* ---- the emulation's communicator: a shared-memory segment named in the id ---- */
#define EMU_SLOT_FLOATS ((size_t)4 << 20) /* per rank: a step of n tokens reduces n * dim floats */
typedef struct {
    pthread_barrier_t bar;
    int size;
    int flag[LLM_TP_MAX];
    float slot[1]; /* [size][EMU_SLOT_FLOATS] */
} emu_comm;

static size_t emu_bytes(int size)
{
    return sizeof(emu_comm) + (size_t)size * EMU_SLOT_FLOATS * sizeof(float);
}

/* The segment has no name to leave behind if the group dies before every rank joined: a memfd that rank 0
 * holds open until then, which the others open through /proc (they are its children, the same user). */
static int emu_id_fd = -1;

static int tp_make_id(unsigned char *id, int size, char *msg, size_t len)
{
    int fd = memfd_create("llm-emutp", MFD_CLOEXEC);
    emu_comm *c = fd >= 0 && ftruncate(fd, (off_t)emu_bytes(size)) == 0
                      ? (emu_comm *)mmap(NULL, emu_bytes(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : (emu_comm *)MAP_FAILED;
    if (c == MAP_FAILED) {
        snprintf(msg, len, "emulated NCCL: cannot create a shared segment: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&c->bar, &a, (unsigned)size);
    c->size = size;
    munmap(c, emu_bytes(size));
    if (emu_id_fd >= 0)
        close(emu_id_fd);
    emu_id_fd = fd;
    memset(id, 0, LLM_TP_ID_BYTES);
    snprintf((char *)id, LLM_TP_ID_BYTES, "/proc/%d/fd/%d", (int)getpid(), fd);
    return 0;
}

static int comm_init(cu_state *st, const unsigned char *id, llm_err *err)
{
    char name[LLM_TP_ID_BYTES];
    memcpy(name, id, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    int fd = open(name, O_RDWR);
    emu_comm *c = fd >= 0 ? (emu_comm *)mmap(NULL, emu_bytes(st->tp.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                          : (emu_comm *)MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (c == MAP_FAILED || c->size != st->tp.size) {
        llm_err_set(err, "cuda backend: emulated NCCL: cannot join %s", name);
        return -1;
    }
    pthread_barrier_wait(&c->bar); /* every rank has mapped it: rank 0's handle can go */
    if (st->tp.rank == 0 && emu_id_fd >= 0) {
        close(emu_id_fd);
        emu_id_fd = -1;
    }
    st->tp.comm = c;
    return 0;
}

static void comm_free(cu_state *st)
{
    if (st->tp.comm != NULL)
        munmap(st->tp.comm, emu_bytes(st->tp.size));
    st->tp.comm = NULL;
}

static void emu_reduce(emu_comm *c, int rank, const float *send, float *buf, size_t n)
{
    for (size_t off = 0; off < n; off += EMU_SLOT_FLOATS) {
        size_t k = n - off < EMU_SLOT_FLOATS ? n - off : EMU_SLOT_FLOATS;
        memcpy(c->slot + (size_t)rank * EMU_SLOT_FLOATS, send + off, k * sizeof(float));
        pthread_barrier_wait(&c->bar);
        for (size_t i = 0; i < k; i++) {
            float s = 0.0f;
            for (int r = 0; r < c->size; r++)
                s += c->slot[(size_t)r * EMU_SLOT_FLOATS + i];
            buf[off + i] = s;
        }
        pthread_barrier_wait(&c->bar);
    }
}

void cuda_tp_allreduce(cu_state *st, const float *send, float *recv, size_t n)
{
    emu_comm *c = (emu_comm *)st->tp.comm;
    int rank = st->tp.rank;
    cu_emu_launch_on(st->stream, dim3(1), dim3(1), 0, [=]() { emu_reduce(c, rank, send, recv, n); });
}

static int agree(cu_state *st, int v)
{
    emu_comm *c = (emu_comm *)st->tp.comm;
    c->flag[st->tp.rank] = v;
    pthread_barrier_wait(&c->bar);
    for (int r = 0; r < c->size; r++)
        v = c->flag[r] < v ? c->flag[r] : v;
    pthread_barrier_wait(&c->bar);
    return v;
}
#endif

int cuda_tp_agree(cu_state *st, int ok)
{
    if (st->tp.size <= 1 || st->tp.agreed)
        return ok;
    int all = agree(st, ok) && ok;
    st->tp.agreed = all ? 1 : 2;
    return all;
}

int cuda_tp_init(cu_state *st, const llm_backend_opts *o, llm_err *err)
{
    st->tp.rank = o->tp_rank;
    st->tp.size = o->tp_size > 1 ? o->tp_size : 1;
    if (st->tp.size <= 1)
        return 0;
#ifndef CU_EMULATE
    if (cudaMalloc((void **)&st->tp.flag, sizeof(int32_t)) != cudaSuccess) {
        llm_err_set(err, "cuda backend: out of device memory");
        return -1;
    }
#endif
    if (comm_init(st, o->tp_id, err) != 0)
        return -1;
    /* a first collective outside any capture (NCCL connects its ranks lazily) */
    st->tp.agreed = 0;
    if (!cuda_tp_agree(st, 1)) {
        llm_err_set(err, "cuda backend: the ranks' first all-reduce failed");
        return -1;
    }
    return 0;
}

void cuda_tp_free(cu_state *st)
{
    comm_free(st);
#ifndef CU_EMULATE
    cudaFree(st->tp.flag);
#endif
    st->tp.flag = NULL;
}

extern "C" __attribute__((visibility("default"))) int llm_cuda_tp_id(unsigned char *id, int size, char *msg,
                                                                      size_t len)
{
    return tp_make_id(id, size, msg, len);
}
