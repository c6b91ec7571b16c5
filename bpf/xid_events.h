/* Types shared by xid.bpf.c and the agent: NVIDIA XID errors from nvidia:nvidia_dev_xid. */
#pragma once

#define XID_DEV_LEN 32  /* PCI name, "0000:3b:00.0" */
#define XID_MSG_LEN 160

struct xid_event {
	__u64 ts_ns;
	__u32 code;
	__u32 pid; /* current task when the driver reported it (often a kernel thread) */
	char dev[XID_DEV_LEN];
	char msg[XID_MSG_LEN];
};
