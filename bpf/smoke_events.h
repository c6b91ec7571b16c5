/* Event shared by smoke.bpf.c and the agent's toolchain self-test. */
#pragma once

struct smoke_event {
	__u32 pid;
	__u32 tid;
	__u64 ts_ns;
};
