/* CPU emulation of CUDA for tests without a GPU: see cuda_emu.h. Shared
 * memory and fresh "device" allocations are poisoned with NaN bytes so that
 * reads of unwritten memory show up in the results; a barrier that not every
 * live thread of the block (or warp) reaches aborts with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <unordered_map>
#include <vector>

#include "cuda_emu.h"

/* Switching between fibers: glibc's swapcontext saves and restores the signal mask with a system call on
 * every switch, which made the emulation spend half its time in the kernel. On x86-64 a switch is instead
 * the callee-saved registers, the SSE/x87 control words and the stack pointer (the System V ABI's view of
 * a call), in cu_emu_ctx_switch below; ucontext stays for other CPUs and under AddressSanitizer, which
 * follows swapcontext but not a hand-made switch. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define EMU_FAST_SWITCH 1
extern "C" void cu_emu_ctx_switch(void **save_sp, void *new_sp);
__asm__(".text\n"
        ".globl cu_emu_ctx_switch\n"
        ".hidden cu_emu_ctx_switch\n"
        ".type cu_emu_ctx_switch,@function\n"
        "cu_emu_ctx_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    subq $8, %rsp\n    stmxcsr (%rsp)\n    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n    fldcw 4(%rsp)\n    addq $8, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size cu_emu_ctx_switch, .-cu_emu_ctx_switch\n");
#else
#define EMU_FAST_SWITCH 0
#endif

namespace {

enum { READY, WAIT_BLOCK, WAIT_WARP, DONE };

struct Fiber {
#if EMU_FAST_SWITCH
    void      *sp;   /* saved stack pointer while switched out */
#else
    ucontext_t ctx;
#endif
    unsigned   tid;
    int        state;
    unsigned   wait_gen;
    float      shfl;
    const void *coll; /* pointer of the lane's current wmma call */
    uint32_t mma_a[4], mma_b[2]; /* the lane's fragments during an emulated mma.sync */
    const uint16_t *ldm_row;     /* the lane's row address during an emulated ldmatrix */
    struct CpCopy { void *dst; const void *src; int bytes; bool valid; unsigned group; };
    std::vector<CpCopy> cp; /* cp.async copies issued and not yet landed */
    unsigned cp_group;      /* the group the next copy joins (groups committed so far) */
};

struct Block {
    std::vector<Fiber> f;
#if EMU_FAST_SWITCH
    void      *sched_sp;
#else
    ucontext_t sched;
#endif
    unsigned   n;
    dim3       bid, bdim, gdim;
    int        live, block_arrived;
    unsigned   block_gen;
    int        warp_arrived[32], warp_live[32];
    unsigned   warp_gen[32];
    const std::function<void()> *body;
    Fiber     *cur;
    std::vector<float> dyn;
};

Block *B;
struct Stacks : std::vector<char *> {
    ~Stacks() { for (char *p : *this) free(p); }
} stacks;  /* fiber stacks, reused by every launch */
const size_t STACK = 128 * 1024;

void die(const char *what)
{
    fprintf(stderr, "cuda emulation: %s (block %u,%u,%u, thread %u)\n", what, B->bid.x, B->bid.y, B->bid.z,
            B->cur != NULL ? B->cur->tid : 0u);
    abort();
}

/* The running fiber gives the CPU back to run_block; run_block runs fiber f until it does. */
void to_sched(Fiber *f)
{
#if EMU_FAST_SWITCH
    cu_emu_ctx_switch(&f->sp, B->sched_sp);
#else
    swapcontext(&f->ctx, &B->sched);
#endif
}

void to_fiber(Fiber *f)
{
#if EMU_FAST_SWITCH
    cu_emu_ctx_switch(&B->sched_sp, f->sp);
#else
    swapcontext(&B->sched, &f->ctx);
#endif
}

void entry()
{
    (*B->body)();
    Fiber *f = B->cur;
    if (!f->cp.empty())
        die("thread exits with cp.async copies it never waited for");
    f->state = DONE;
    B->live--;
    int w = (int)(f->tid / 32);
    B->warp_live[w]--;
    /* Threads that exit count as arrived for waiters (all our kernels exit block- or warp-uniformly). */
    if (B->block_arrived > 0 && B->block_arrived == B->live) {
        B->block_arrived = 0;
        B->block_gen++;
    }
    if (B->warp_arrived[w] > 0 && B->warp_arrived[w] == B->warp_live[w]) {
        B->warp_arrived[w] = 0;
        B->warp_gen[w]++;
    }
}

void warp_barrier(int w)
{
    Fiber *f = B->cur;
    if (++B->warp_arrived[w] == B->warp_live[w]) {
        B->warp_arrived[w] = 0;
        B->warp_gen[w]++;
        return;
    }
    f->state = WAIT_WARP;
    f->wait_gen = B->warp_gen[w];
    to_sched(f);
}

/* Warp w has 32 threads and all of them are live (what shuffles and tensor-core calls need). */
bool full_warp(int w)
{
    unsigned in_warp = B->n - (unsigned)w * 32 < 32 ? B->n - (unsigned)w * 32 : 32;
    return in_warp == 32 && B->warp_live[w] == 32;
}

/* Warp by warp: each warp runs as far as it can (to a __syncthreads, or its end) before the next one
 * starts. The most hostile order for a missing __syncthreads: warp 0 reads what later warps have not
 * written yet, and overwrites what they have not read yet. */
void run_block()
{
    const unsigned nw = (B->n + 31) / 32;
    for (;;) {
        bool progress = false, all_done = true;
        for (unsigned w = 0; w < nw; w++)
            for (bool again = true; again;) {
                again = false;
                for (unsigned t = 32 * w; t < B->n && t < 32 * w + 32; t++) {
                    Fiber &f = B->f[t];
                    if (f.state == DONE)
                        continue;
                    all_done = false;
                    bool go = f.state == READY || (f.state == WAIT_BLOCK && B->block_gen != f.wait_gen) ||
                              (f.state == WAIT_WARP && B->warp_gen[w] != f.wait_gen);
                    if (!go)
                        continue;
                    f.state = READY;
                    B->cur = &f;
                    to_fiber(&f);
                    progress = again = true;
                }
            }
        if (all_done)
            return;
        if (!progress)
            die("deadlock: a barrier or shuffle not reached by every live thread");
    }
}

float half_to_float(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
    if (e == 0) {
        if (m == 0) {
            u = s;
        } else { /* subnormal */
            e = 127 - 15 + 1;
            while (!(m & 1024)) {
                m <<= 1;
                e--;
            }
            u = s | (e << 23) | ((m & 1023) << 13);
        }
    } else if (e == 31) {
        u = s | 0x7f800000u | (m << 13);
    } else {
        u = s | ((e + 127 - 15) << 23) | (m << 13);
    }
    return __uint_as_float(u);
}

uint16_t float_to_half(float f)
{
    uint32_t u = __float_as_uint(f), s = (u >> 16) & 0x8000u;
    int32_t e = (int32_t)((u >> 23) & 255) - 127 + 15;
    uint32_t m = u & 0x7fffffu;
    if (((u >> 23) & 255) == 255)
        return (uint16_t)(s | 0x7c00u | (m ? 0x200u : 0));
    if (e >= 31)
        return (uint16_t)(s | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)s;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(s | r);
    }
    uint32_t r = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
        r++; /* may carry into the exponent: still right (up to infinity) */
    return (uint16_t)(s | r);
}

float fetch(cudaDataType_t t, const void *p, size_t i)
{
    switch (t) {
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_16F: return half_to_float(((const uint16_t *)p)[i]);
    default:         return __uint_as_float((uint32_t)((const uint16_t *)p)[i] << 16);
    }
}

#if EMU_FAST_SWITCH
/* A fiber's first switch "returns" here: run the thread, then leave for good (it is DONE). */
void fiber_start()
{
    entry();
    Fiber *f = B->cur;
    to_sched(f);
    die("a finished fiber was resumed");
}
#endif

__attribute__((noinline)) void setup_fiber(Fiber *f, unsigned t)
{
    f->tid = t;
    f->state = READY;
    f->cp.clear();
    f->cp_group = 0;
#if EMU_FAST_SWITCH
    /* The stack as cu_emu_ctx_switch leaves it, from the top: a zero return address for fiber_start (16-byte
     * aligned slot below it, as after a call), fiber_start as the address `ret` goes to, six zeroed
     * callee-saved registers, then MXCSR and the x87 control word at their defaults. */
    uintptr_t top = ((uintptr_t)stacks[t] + STACK) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 16);
    sp[1] = 0;
    sp[0] = (uint64_t)(uintptr_t)&fiber_start;
    sp -= 7;
    for (int i = 1; i < 7; i++)
        sp[i] = 0;
    uint32_t ctl[2] = { 0x1f80u, 0x037fu };
    memcpy(sp, ctl, sizeof(ctl));
    f->sp = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stacks[t];
    f->ctx.uc_stack.ss_size = STACK;
    f->ctx.uc_link = &B->sched;
    makecontext(&f->ctx, entry, 0);
#endif
}

} // namespace

dim3 cu_emu_thread_idx(void) { return dim3(B->cur->tid, 0, 0); }
dim3 cu_emu_block_idx(void) { return B->bid; }
dim3 cu_emu_block_dim(void) { return B->bdim; }
dim3 cu_emu_grid_dim(void) { return B->gdim; }
/* 128-byte aligned like a GPU's dynamic shared memory (wmma needs 32-byte aligned tiles) */
float *cu_emu_dyn_smem(void) { return (float *)(((uintptr_t)B->dyn.data() + 127) & ~(uintptr_t)127); }

void __syncthreads(void)
{
    Fiber *f = B->cur;
    if (++B->block_arrived == B->live) {
        B->block_arrived = 0;
        B->block_gen++;
        return;
    }
    f->state = WAIT_BLOCK;
    f->wait_gen = B->block_gen;
    to_sched(f);
}

float __shfl_xor_sync(unsigned mask, float v, int lane_mask)
{
    Fiber *f = B->cur;
    int w = (int)(f->tid / 32), lane = (int)(f->tid % 32);
    if (mask != 0xffffffffu || !full_warp(w))
        die("full-warp shuffle without all 32 lanes");
    f->shfl = v;
    warp_barrier(w);
    float r = B->f[(size_t)w * 32 + (size_t)(lane ^ lane_mask)].shfl;
    warp_barrier(w);
    return r;
}

void cu_emu_warp_collective(const void *p, const char *what)
{
    Fiber *f = B->cur;
    int w = (int)(f->tid / 32);
    if (!full_warp(w))
        die(what);
    f->coll = p;
    warp_barrier(w);
    bool same = B->f[(size_t)w * 32].coll == p;
    warp_barrier(w);
    if (!same)
        die(what);
}

void cu_emu_cp_async(void *dst, const void *src, int bytes, bool valid)
{
    Fiber *f = B->cur;
    uintptr_t d = (uintptr_t)dst, lo = (uintptr_t)B->dyn.data(), hi = lo + B->dyn.size() * sizeof(float);
    if (d < lo || d + (uintptr_t)bytes > hi)
        die("cp.async destination outside the block's dynamic shared memory");
    if ((d | (uintptr_t)(valid ? src : NULL)) % (uintptr_t)bytes != 0)
        die("cp.async address not aligned to its size");
    memset(dst, 0xff, (size_t)bytes); /* in flight: whatever a reader finds there now is not the data */
    f->cp.push_back(Fiber::CpCopy{ dst, src, bytes, valid, f->cp_group });
}

void cu_emu_cp_commit(void) { B->cur->cp_group++; }

void cu_emu_cp_wait(int n)
{
    Fiber *f = B->cur;
    size_t keep = 0;
    for (size_t i = 0; i < f->cp.size(); i++) {
        Fiber::CpCopy &c = f->cp[i];
        if (c.group + (unsigned)n < f->cp_group) { /* committed, and older than the n newest groups */
            if (c.valid)
                memcpy(c.dst, c.src, (size_t)c.bytes);
            else
                memset(c.dst, 0, (size_t)c.bytes);
        } else {
            f->cp[keep++] = c;
        }
    }
    f->cp.resize(keep);
}

void cu_mma_16816(float *d, const uint32_t *a, const uint32_t *b)
{
    Fiber *f = B->cur;
    int w = (int)(f->tid / 32), lane = (int)(f->tid % 32), g = lane / 4, t = lane % 4;
    if (!full_warp(w))
        die("mma.sync without all 32 lanes");
    memcpy(f->mma_a, a, sizeof f->mma_a);
    memcpy(f->mma_b, b, sizeof f->mma_b);
    warp_barrier(w);
    const Fiber *L = &B->f[(size_t)w * 32];
    /* element (r, k) of A and (k, n) of B, from the lane and register PTX puts them in */
    auto half_at = [](uint32_t u, int hi) { return half_to_float((uint16_t)(hi ? u >> 16 : u & 0xffffu)); };
    auto A = [&](int r, int k) {
        return half_at(L[(r % 8) * 4 + (k % 8) / 2].mma_a[(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
    };
    auto Bm = [&](int k, int n) { return half_at(L[n * 4 + (k % 8) / 2].mma_b[k >= 8 ? 1 : 0], k % 2); };
    float out[4];
    for (int i = 0; i < 4; i++) {
        int r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i % 2);
        float s = d[i];
        for (int k = 0; k < 16; k++)
            s += A(r, k) * Bm(k, n);
        out[i] = s;
    }
    warp_barrier(w); /* every lane has read the others' fragments */
    memcpy(d, out, sizeof out);
}

void cu_emu_ldmatrix(uint32_t *r, const void *row, bool trans)
{
    Fiber *f = B->cur;
    int w = (int)(f->tid / 32), lane = (int)(f->tid % 32);
    if (!full_warp(w))
        die("ldmatrix without all 32 lanes");
    uintptr_t a = (uintptr_t)row, lo = (uintptr_t)B->dyn.data(), hi = lo + B->dyn.size() * sizeof(float);
    if (a < lo || a + 16 > hi || a % 16 != 0)
        die("ldmatrix row outside the block's dynamic shared memory or not 16-byte aligned");
    f->ldm_row = (const uint16_t *)row;
    warp_barrier(w);
    const Fiber *L = &B->f[(size_t)w * 32];
    int g = lane / 4, t = lane % 4;
    uint32_t out[4];
    for (int i = 0; i < 4; i++) { /* matrix i: rows from lanes 8i .. 8i+7 */
        uint16_t e0 = trans ? L[8 * i + 2 * t].ldm_row[g] : L[8 * i + g].ldm_row[2 * t];
        uint16_t e1 = trans ? L[8 * i + 2 * t + 1].ldm_row[g] : L[8 * i + g].ldm_row[2 * t + 1];
        out[i] = (uint32_t)e0 | ((uint32_t)e1 << 16);
    }
    warp_barrier(w); /* every lane has read the others' rows */
    memcpy(r, out, sizeof out);
}

float cu_emu_bf16_to_float(__nv_bfloat16 b) { return __uint_as_float((unsigned)b.b << 16); }

void cu_emu_launch(dim3 grid, dim3 block, size_t smem, std::function<void()> body)
{
    if (block.y != 1 || block.z != 1 || block.x == 0 || block.x > 1024 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.y > 65535 || grid.z > 65535) {
        fprintf(stderr, "cuda emulation: bad launch %ux%ux%u blocks of %ux%ux%u\n", grid.x, grid.y, grid.z, block.x,
                block.y, block.z);
        abort();
    }
    if (smem > 232448) {
        fprintf(stderr, "cuda emulation: %zu bytes of dynamic shared memory is over the device limit\n", smem);
        abort();
    }
    while (stacks.size() < block.x)
        stacks.push_back((char *)malloc(STACK));
    Block blk;
    blk.n = block.x;
    blk.bdim = block;
    blk.gdim = grid;
    blk.body = &body;
    blk.dyn.resize(smem / sizeof(float) + 1 + 32);
    Block *saved = B;
    B = &blk;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blk.bid = dim3(x, y, z);
                blk.f.assign(block.x, Fiber());
                blk.live = (int)block.x;
                blk.block_arrived = 0;
                blk.block_gen = 0;
                for (int w = 0; w < 32; w++) {
                    blk.warp_arrived[w] = 0;
                    blk.warp_gen[w] = 0;
                    int left = (int)block.x - 32 * w;
                    blk.warp_live[w] = left <= 0 ? 0 : (left < 32 ? left : 32);
                }
                memset(blk.dyn.data(), 0xff, blk.dyn.size() * sizeof(float)); /* NaN poison */
                blk.cur = NULL;
                for (unsigned t = 0; t < block.x; t++)
                    setup_fiber(&blk.f[t], t);
                run_block();
            }
    B = saved;
}

float __half2float(__half h) { return half_to_float(h.b); }
__half __float2half_rn(float f) { __half h; h.b = float_to_half(f); return h; }
__nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u = __float_as_uint(f);
    __nv_bfloat16 b;
    b.b = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return b;
}

/* ---- runtime ---- */
struct cu_emu_stream {
    bool capturing = false, invalid = false;
    std::vector<std::function<void()>> rec; /* the operations recorded during capture */
};
struct cu_emu_event { double t = 0.0; };
struct cu_emu_blas {
    cudaStream_t stream = NULL;
    void        *ws = NULL;
};
struct cu_emu_graph {
    std::vector<std::function<void()>> ops;
};

namespace {
cudaError_t last_error = cudaSuccess;
std::vector<cu_emu_stream *> capturing_streams;

cudaError_t fail_with(cudaError_t e)
{
    last_error = e;
    return e;
}

/* A call that is illegal while any capture is open: every open capture is invalidated (its EndCapture
 * fails) and the call fails, as the runtime does. */
bool capture_forbids(const char *what)
{
    if (capturing_streams.empty())
        return false;
    fprintf(stderr, "cuda emulation: %s during stream capture (capture invalidated)\n", what);
    for (cu_emu_stream *s : capturing_streams)
        s->invalid = true;
    return true;
}
#define FORBID_IN_CAPTURE(what)                                   \
    do {                                                          \
        if (capture_forbids(what))                                \
            return fail_with(cudaErrorStreamCaptureUnsupported);  \
    } while (0)
} // namespace

void cu_emu_launch_on(cudaStream_t s, dim3 grid, dim3 block, size_t smem, std::function<void()> body)
{
    if (s != NULL && s->capturing) {
        s->rec.push_back([=]() { cu_emu_launch(grid, block, smem, body); });
        return;
    }
    cu_emu_launch(grid, block, smem, body);
}

/* Device memory accounting: bytes live and their peak; with a capacity (CU_EMU_MEM, or cu_emu_mem_limit from a
 * test), an allocation past it fails as cudaMalloc does on a full device, and cudaMemGetInfo reports it. */
namespace {
std::map<uintptr_t, size_t> dev_allocs; /* by start address: a pointer is looked up by range */
size_t dev_used, dev_peak, dev_cap;
unsigned long dev_calls, dev_fail_at;
bool dev_cap_read;

int cur_dev; /* cudaSetDevice's */

size_t cap_bytes(void)
{
    /* CU_EMU_MEM_DEVICE=D: the capacity is only device D's (one rank of a split model out of memory) */
    const char *md = getenv("CU_EMU_MEM_DEVICE");
    if (md != NULL && atoi(md) != cur_dev)
        return 0;
    if (!dev_cap_read) {
        dev_cap_read = true;
        const char *v = getenv("CU_EMU_MEM");
        if (v != NULL) {
            char *end;
            double x = strtod(v, &end);
            double unit = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1.0;
            dev_cap = x > 0 ? (size_t)(x * unit) : 0;
        }
    }
    return dev_cap;
}
} // namespace

void cu_emu_check_dev_ptr(const void *p, int arg)
{
    if (p == NULL)
        return;
    uintptr_t a = (uintptr_t)p;
    auto it = dev_allocs.upper_bound(a);
    if (it != dev_allocs.begin() && a <= (--it)->first + it->second) /* one past the end is a valid pointer */
        return;
    fprintf(stderr, "cuda emulation: kernel argument %d (%p) is not in device memory (cudaMalloc): a GPU kernel "
            "reading it faults\n", arg, p);
    abort();
}

extern "C" size_t cu_emu_mem_used(void) { return dev_used; }
/* cudaMalloc calls so far, and the number (counted from now, from 1) of one to refuse; 0 refuses none. */
extern "C" unsigned long cu_emu_mem_allocs(void) { return dev_calls; }
extern "C" void cu_emu_mem_fail_nth(unsigned long k) { dev_fail_at = k > 0 ? dev_calls + k : 0; }
extern "C" size_t cu_emu_mem_peak(void) { return dev_peak; }
extern "C" void cu_emu_mem_limit(size_t bytes)
{
    dev_cap_read = true;
    dev_cap = bytes;
    dev_peak = dev_used;
}

namespace {
std::unordered_map<const void *, int> smem_allowed; /* by kernel: cudaFuncAttributeMaxDynamicSharedMemorySize */
const size_t SMEM_DEFAULT = 48 * 1024, SMEM_OPTIN = 232448;
} // namespace

cudaError_t cu_emu_smem_allow(const void *kernel, int bytes)
{
    if (bytes < 0 || (size_t)bytes > SMEM_OPTIN)
        return fail_with(cudaErrorInvalidValue);
    smem_allowed[kernel] = bytes;
    return cudaSuccess;
}

void cu_emu_smem_check(const void *kernel, size_t smem)
{
    if (smem <= SMEM_DEFAULT)
        return;
    auto it = smem_allowed.find(kernel);
    if (it == smem_allowed.end() || smem > (size_t)it->second) {
        fprintf(stderr, "cuda emulation: a launch with %zu bytes of dynamic shared memory, over the kernel's "
                "allowance of %d (cudaFuncSetAttribute MaxDynamicSharedMemorySize): a GPU refuses it\n", smem,
                it == smem_allowed.end() ? (int)SMEM_DEFAULT : it->second);
        abort();
    }
}

/* CU_EMU_DEVICES=N: N devices (default 1), so that a model split over several GPUs can run, one process a
 * device, each process's memory its own device's */
static int emu_devices(void)
{
    const char *d = getenv("CU_EMU_DEVICES");
    return d != NULL && atoi(d) > 0 ? atoi(d) : 1;
}
cudaError_t cudaGetDeviceCount(int *n) { *n = emu_devices(); return cudaSuccess; }
cudaError_t cudaSetDevice(int d)
{
    if (d < 0 || d >= emu_devices())
        return fail_with(cudaErrorInvalidValue);
    cur_dev = d;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "CPU emulation of CUDA");
    const char *sms = getenv("CU_EMU_SMS");
    p->multiProcessorCount = sms != NULL && atoi(sms) > 0 ? atoi(sms) : 4;
    p->sharedMemPerBlockOptin = SMEM_OPTIN;
    size_t cap = cap_bytes();
    p->totalGlobalMem = cap > 0 ? cap : (size_t)16 << 30;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { FORBID_IN_CAPTURE("cudaDeviceSynchronize"); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = new cu_emu_stream(); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { FORBID_IN_CAPTURE("cudaStreamSynchronize"); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = new cu_emu_event(); return cudaSuccess; }
static double emu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new cu_emu_event(); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t)
{
    e->t = emu_now_ms();
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(b->t - a->t);
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { FORBID_IN_CAPTURE("cudaEventSynchronize"); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n)
{
    FORBID_IN_CAPTURE("cudaMalloc");
    size_t cap = cap_bytes();
    bool injected = ++dev_calls == dev_fail_at;
    /* CU_EMU_MEM_FAIL_NTH=K: refuse the K-th allocation of this process (of device CU_EMU_MEM_DEVICE's only) */
    static long env_nth = -1, env_calls;
    if (env_nth < 0) {
        const char *v = getenv("CU_EMU_MEM_FAIL_NTH");
        env_nth = v != NULL && atol(v) > 0 ? atol(v) : 0;
    }
    const char *md = getenv("CU_EMU_MEM_DEVICE");
    if (env_nth > 0 && (md == NULL || atoi(md) == cur_dev) && ++env_calls == env_nth)
        injected = true;
    if (injected || (cap > 0 && (dev_used > cap || n > cap - dev_used)) || posix_memalign(p, 256, n ? n : 1) != 0) {
        *p = NULL;
        return fail_with(cudaErrorMemoryAllocation);
    }
    memset(*p, 0xff, n); /* device memory starts as garbage: NaN bytes */
    dev_allocs[(uintptr_t)*p] = n;
    dev_used += n;
    dev_peak = dev_used > dev_peak ? dev_used : dev_peak;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    FORBID_IN_CAPTURE("cudaFree");
    auto it = dev_allocs.find((uintptr_t)p);
    if (it != dev_allocs.end()) {
        dev_used -= it->second;
        dev_allocs.erase(it);
    } else if (p != NULL) {
        fprintf(stderr, "cu_emu: cudaFree of %p, which cudaMalloc did not return\n", p);
        abort();
    }
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned)
{
    FORBID_IN_CAPTURE("cudaHostAlloc");
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : fail_with(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p) { FORBID_IN_CAPTURE("cudaFreeHost"); free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind)
{
    FORBID_IN_CAPTURE("cudaMemcpy (synchronous)");
    memcpy(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t st)
{
    if (st != NULL && st->capturing)
        st->rec.push_back([=]() { memcpy(d, s, n); });
    else
        memcpy(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
    FORBID_IN_CAPTURE("cudaMemset (synchronous)");
    memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
    if (st != NULL && st->capturing)
        st->rec.push_back([=]() { memset(d, v, n); });
    else
        memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    size_t cap = cap_bytes();
    *total_b = cap > 0 ? cap : (size_t)16 << 30;
    *free_b = cap > 0 ? (dev_used < cap ? cap - dev_used : 0) : ((size_t)15 << 30) - dev_used;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return "emulated error";
    }
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode)
{
    if (s == NULL || s->capturing)
        return fail_with(cudaErrorInvalidValue);
    s->capturing = true;
    s->invalid = false;
    s->rec.clear();
    capturing_streams.push_back(s);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    *g = NULL;
    if (s == NULL || !s->capturing)
        return fail_with(cudaErrorInvalidValue);
    s->capturing = false;
    for (size_t i = 0; i < capturing_streams.size(); i++)
        if (capturing_streams[i] == s) {
            capturing_streams.erase(capturing_streams.begin() + (long)i);
            break;
        }
    const char *f = getenv("CU_EMU_CAPTURE_FAIL");
    bool bad = s->invalid || (f != NULL && f[0] == '1');
    if (bad) {
        s->rec.clear();
        return fail_with(cudaErrorStreamCaptureInvalidated);
    }
    cu_emu_graph *gr = new cu_emu_graph();
    gr->ops.swap(s->rec);
    *g = gr;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
    FORBID_IN_CAPTURE("cudaGraphInstantiate");
    if (g == NULL)
        return fail_with(cudaErrorInvalidValue);
    *e = new cu_emu_graph(*g);
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    if (e == NULL)
        return fail_with(cudaErrorInvalidValue);
    if (s != NULL && s->capturing) { /* a graph launched into a capture becomes one recorded step */
        s->rec.push_back([=]() { for (auto &op : e->ops) op(); });
        return cudaSuccess;
    }
    for (auto &op : e->ops)
        op();
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete e; return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }

cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new cu_emu_blas(); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { h->stream = s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    h->ws = bytes > 0 ? ws : NULL;
    return CUBLAS_STATUS_SUCCESS;
}

namespace {
void gemm_ref(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float a, const void *A,
              cudaDataType_t at, int lda, const void *B_, cudaDataType_t bt, int ldb, float b, float *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f;
            for (int l = 0; l < k; l++) {
                size_t ia = ta == CUBLAS_OP_N ? (size_t)i + (size_t)l * lda : (size_t)l + (size_t)i * lda;
                size_t ib = tb == CUBLAS_OP_N ? (size_t)l + (size_t)j * ldb : (size_t)j + (size_t)l * ldb;
                acc += fetch(at, A, ia) * fetch(bt, B_, ib);
            }
            float *pc = c + (size_t)i + (size_t)j * ldc;
            *pc = b == 0.0f ? a * acc : a * acc + b * *pc; /* beta 0: C is not read */
        }
}
} // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B_,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t, cublasGemmAlgo_t)
{
    /* Column-major, as cuBLAS: C (m x n) = alpha op(A) op(B) + beta C; C must be f32 here. */
    if (ct != CUDA_R_32F || at != bt || m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) ||
        ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    float a = *(const float *)alpha, b = *(const float *)beta; /* host pointer mode: read at the call */
    cu_emu_check_dev_ptr(A, 6); /* the matrices are read on the device */
    cu_emu_check_dev_ptr(B_, 9);
    cu_emu_check_dev_ptr(C, 14);
    float *c = (float *)C;
    cudaStream_t s = h->stream;
    if (s != NULL && s->capturing) {
        if (h->ws == NULL) {
            fprintf(stderr, "cuda emulation: cublasGemmEx captured without cublasSetWorkspace\n");
            s->invalid = true;
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        s->rec.push_back([=]() { gemm_ref(ta, tb, m, n, k, a, A, at, lda, B_, bt, ldb, b, c, ldc); });
        return CUBLAS_STATUS_SUCCESS;
    }
    gemm_ref(ta, tb, m, n, k, a, A, at, lda, B_, bt, ldb, b, c, ldc);
    return CUBLAS_STATUS_SUCCESS;
}
