/* Updates of map values that every thread of a process (and every CPU) shares. A plain `++` or
 * `+=` is a load, an add and a store: two threads on two CPUs lose one of the updates. Adds use
 * __sync_fetch_and_add (BPF_ATOMIC); a floor at zero needs compare-and-exchange (-mcpu=v3).
 * tests/agent/check_bpf_atomics.py checks the compiled objects for the plain form. */
#pragma once

/* Bounded for the verifier; each retry means another CPU changed the value in between, so 64 in
 * a row does not happen in practice. */
#define VIGIL_CAS_RETRIES 64

/* *v -= d, stopping at zero: something acquired before the agent attached is released for more
 * than the agent saw. */
static __always_inline void atomic_sub_floor(__u64 *v, __u64 d)
{
	for (int i = 0; i < VIGIL_CAS_RETRIES; i++) {
		__u64 old = *(volatile __u64 *)v;
		__u64 new = old > d ? old - d : 0;

		if (__sync_val_compare_and_swap(v, old, new) == old)
			return;
	}
}

/* *v -= 1 while it is above zero. */
static __always_inline void atomic_dec_above_zero(__s64 *v)
{
	for (int i = 0; i < VIGIL_CAS_RETRIES; i++) {
		__s64 old = *(volatile __s64 *)v;

		if (old <= 0 || __sync_val_compare_and_swap(v, old, old - 1) == old)
			return;
	}
}
