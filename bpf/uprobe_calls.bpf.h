/* In-flight library calls for the uprobe programs whose cookie names the function (cuda, nccl):
 * the entry saves a call's arguments, the return program looks them up and deletes them. */
#pragma once
#include "probe_stats.bpf.h"

struct call_key {
	__u32 tid;
	__u32 fn;
};

struct call_args {
	__u64 arg[5]; /* libbpf 1.1 reads at most five register arguments */
};

/* Arguments saved at entry for the return probe; LRU so calls that never return do not leak. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct call_key);
	__type(value, struct call_args);
} inflight SEC(".maps");

/* The body of an entry program: counts the event and saves the arguments for the return. */
static __always_inline int save_call(struct pt_regs *ctx)
{
	struct call_key k = { .tid = (__u32)bpf_get_current_pid_tgid(), .fn = bpf_get_attach_cookie(ctx) };
	struct call_args a = {
		.arg = { PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
			 PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx) },
	};

	stat_inc(VIGIL_STAT_EVENTS);
	bpf_map_update_elem(&inflight, &k, &a, BPF_ANY);
	return 0;
}
