/* Process lifecycle events from proc.bpf.c: the agent re-scans a process's maps after exec and
 * starts its grace period at exit. */
#pragma once

enum vigil_proc_event_kind {
	PROC_EXEC = 1,
	PROC_EXIT = 2,
};

struct vigil_proc_event {
	__u32 tgid;
	__u32 kind;
};
