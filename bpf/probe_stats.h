/* Indexes of the per-CPU self-counters every Vigil BPF program keeps (read by the agent). */
#pragma once

enum vigil_probe_stat {
	VIGIL_STAT_EVENTS = 0,        /* probe hits handled */
	VIGIL_STAT_RINGBUF_DROPS = 1, /* ring buffer full: event lost */
	VIGIL_STAT_TABLE_FULL = 2,    /* an insert a full hash table refused */
	VIGIL_STAT_MAX = 3,
};
