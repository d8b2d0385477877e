// memowalk: malloc calls made so that the fast engine's walk memo
// (tracer/fast/walk.S, "The walk memo") would give a wrong backtrace if
// any of its checks were missing:
// - leaf's malloc from via_a and via_b: the same return address and stack
//   pointer (the callers' frames are alike), other frames above;
// - 300 wrappers of leaf2, each a call site of its own: more stacks than
//   the stack cache's 256 slots, so via_a's slot holds another stack by
//   the time via_a runs again;
// - rec: leaf's malloc at depths 1 to 40 (other stack pointers; deeper
//   than the 10 frames of a backtrace, the frames repeat);
// - memowalk_fp.c (-O0): the same first frame, return addresses and rbp,
//   a saved rbp that differs, and other frames above it.
// Every block is freed. Prints the calls leaf and leaf2 made, and whether
// memowalk_fp's first frames were at one place ("alike": they must be).
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;
static int calls;

__attribute__((noinline)) static void *leaf(size_t n) {
	void *p = malloc(n);
	sink = p; // no tail call: the return comes back here
	calls++;
	return p;
}

__attribute__((noinline)) static void *leaf2(size_t n) {
	void *p = malloc(n);
	sink = p;
	calls++;
	return p;
}

__attribute__((noinline)) static void *via_a(size_t n) {
	void *p = leaf(n);
	sink = p;
	return p;
}

__attribute__((noinline)) static void *via_b(size_t n) {
	void *p = leaf(n + 1);
	sink = p;
	return p;
}

#define W(k)                                                                                       \
	__attribute__((noinline)) static void *w##k(void) {                                        \
		void *p = leaf2(k + 1);                                                            \
		sink = p;                                                                          \
		return p;                                                                          \
	}
#define W10(k) W(k##0) W(k##1) W(k##2) W(k##3) W(k##4) W(k##5) W(k##6) W(k##7) W(k##8) W(k##9)
#define W100(k)                                                                                    \
	W10(k##0) W10(k##1) W10(k##2) W10(k##3) W10(k##4) W10(k##5) W10(k##6) W10(k##7) W10(k##8) \
	    W10(k##9)
W100(1) W100(2) W100(3)

#define P(k) w##k,
#define P10(k) P(k##0) P(k##1) P(k##2) P(k##3) P(k##4) P(k##5) P(k##6) P(k##7) P(k##8) P(k##9)
#define P100(k)                                                                                    \
	P10(k##0) P10(k##1) P10(k##2) P10(k##3) P10(k##4) P10(k##5) P10(k##6) P10(k##7) P10(k##8) \
	    P10(k##9)
static void *(*const wrappers[])(void) = {P100(1) P100(2) P100(3)};

__attribute__((noinline)) static void *rec(int depth) {
	void *p = depth <= 1 ? leaf(24) : rec(depth - 1);
	sink = p;
	return p;
}

// The -O0 frame-pointer chain (memowalk_fp.c).
void *memowalk_fp(int which);
extern void *volatile memowalk_sp[2];

int main(void) {
	for (int round = 0; round < 3; round++) {
		free(via_a(16));
		free(via_b(16));
		free(via_a(16));
		for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++)
			free(wrappers[i]());
		free(via_a(16)); // its stack cache slot now holds another stack
		free(via_b(16));
		for (int d = 1; d <= 40; d++)
			free(rec(d));
		for (int w = 0; w < 4; w++)
			free(memowalk_fp(w));
	}
	// The test needs fp_leaf's frame at one place through both callers.
	printf("memowalk %d, fp frames %s\n", calls, memowalk_sp[0] == memowalk_sp[1] ? "alike" : "apart");
	return 0;
}
