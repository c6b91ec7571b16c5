/* Integer log2 without clz (BPF has none), as libbpf-tools' bits.bpf.h does it. */
#pragma once

static __always_inline __u64 log2_u32(__u32 v)
{
	__u32 shift, r;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u64 log2_u64(__u64 v)
{
	__u32 hi = v >> 32;

	return hi ? log2_u32(hi) + 32 : log2_u32(v);
}

/* Smallest i with v <= 2^i: the bucket whose upper bound ("le") holds v. */
static __always_inline __u64 log2_ceil(__u64 v)
{
	return v <= 1 ? 0 : log2_u64(v - 1) + 1;
}
