#include "textflag.h"

// func rdtsc() uint64
TEXT ·rdtsc(SB), NOSPLIT, $0-8
	RDTSC
	SHLQ $32, DX
	ORQ DX, AX
	MOVQ AX, ret+0(FP)
	RET

// func ReadTSC() uint64
TEXT ·ReadTSC(SB), NOSPLIT, $0-8
	LFENCE
	RDTSC
	LFENCE
	SHLQ $32, DX
	ORQ DX, AX
	MOVQ AX, ret+0(FP)
	RET
