# The in-process stack walker, included by stub.S: a resource call's
# backtrace, found with the unwind rows rtrace compiles from each module's
# CFI (tracer/unwind/table.go, Table) and puts in the process, the same
# frames tracer/unwind's Backtrace finds from the same registers. Where
# the rows' model ends (a row that stops, a module without its table yet,
# a load outside the thread's stack, more than WALKMAX frames), the
# thread stops at walk_stop_trap and rtrace finishes the walk from the
# frame reached. docs/FAST-PATH.md, "The walker".
#
# The module index (UNWIND): {n, n x {lo, hi, bias, table}}, sorted by lo,
# the modules tracer/unwind knows; a table: {n, n x u32 start (link-time
# address), n x u64 row (8-byte aligned)}; table 0: not compiled yet.
# Packed rows (table.go): kind in bits 0-2, then flags and offsets.
	.set ROWFP,     0
	.set ROWCFA,    1
	.set ROWEND,    2
	.set ROWBASEBP, 8
	.set ROWSIGNAL, 16

# The walk memo: a walk is a function of its first frame (pc, stack
# pointer, rbp), the rows (UNWIND), the thread's stack bounds and depth
# (STACKLO, STACKHI, BTDEPTH), and the words it loads from the stack. An
# entry, keyed by the pc and stack pointer, keeps those and the stack
# cache slot the frames went to; while each of them is the same and the
# slot's generation (SCGEN) says it still holds those frames, the walk
# would find them again, and the call names the slot without walking,
# hashing or comparing (res.S, exit_res). rbp is part of the key only
# when the walk read it before a row replaced it (MF_BP). A walk that
# stopped for rtrace, met a word that may be an exit (walk_real), or
# loaded more than MREADS words fills no entry.
	.set MEMOS,    64
	.set MEMOENT,  0x200
	.set M_PC,     0x00     # frame 0 (0: the entry holds nothing)
	.set M_SP,     0x08
	.set M_BP,     0x10
	.set M_FLAGS,  0x18     # MF_*
	.set M_UNW,    0x20     # UNWIND, STACKLO, STACKHI, BTDEPTH as the walk began
	.set M_LO,     0x28
	.set M_HI,     0x30
	.set M_DEPTH,  0x38
	.set M_SLOT,   0x40     # the stack cache slot of the frames
	.set M_GEN,    0x48     # its SCGEN then
	.set M_N,      0x50     # the frames
	.set M_NR,     0x58     # the loads: {address, word} from M_READS on
	.set M_READS,  0x60
	.set MREADS,   (MEMOENT - M_READS) / 16
	.set MF_RBP0,  1        # rbp is still the first frame's
	.set MF_BP,    2        # the walk read the first frame's rbp
	.set MF_NONE,  4        # the walk fills no entry

# MEMOREC records the walk's load of \val from \addr in the entry it
# fills (MEMOCUR, which memo_probe set). Clobbers rsi.
.macro MEMOREC addr, val
	mov MEMON(%rdi), %rsi
	cmp $MREADS, %rsi
	jae 98f
	shl $4, %rsi
	add MEMOCUR(%rdi), %rsi
	mov \addr, M_READS(%rsi)
	mov \val, M_READS+8(%rsi)
	incq MEMON(%rdi)
	jmp 99f
98:	orq $MF_NONE, MEMOF(%rdi)
99:
.endm

# MEMOBP: the walk uses rbp; if it is still the first frame's, the entry
# holds for that rbp only.
.macro MEMOBP
	testb $MF_RBP0, MEMOF(%rdi)
	jz 99f
	orq $MF_BP, MEMOF(%rdi)
99:
.endm

# walk: %r8 the pc of frame 0 (a call's return address), %r9 its caller's
# stack pointer, %r10 its rbp; state in %rdi. Leaves the frames at WALKBUF
# and their count in %rbx and WALKN. Clobbers rax, rcx, rdx, rsi, r8-r12,
# r15.
walk:
	xor %ebx, %ebx
	test %r8, %r8
	jz walk_done
	cmp STACKLO(%rdi), %r9
	jb walk_first           # another stack (a signal's alternate one)
	cmp STACKHI(%rdi), %r9
	ja walk_first
	mov %r9, %r15           # loads stay in [r15, STACKHI)
	xor %r11d, %r11d        # exact: the pc is a return address
	mov UNWIND(%rdi), %rax  # once a walk: the index changes only at a
	cmp PCGEN(%rdi), %rax   # stop, and a walk that stops is rtrace's then
	jne walk_flush
walk_frame:
	mov %r8, WALKBUF(%rdi,%rbx,8)
	inc %rbx
	cmp BTDEPTH(%rdi), %rbx
	jae walk_done
	cmp $WALKMAX, %rbx
	jae walk_stop
walk_cached:
	lea (%r11,%r8,2), %rcx  # the key: pc * 2 + exact
	mov %rbx, %rdx          # the last walk's row at this depth, first:
	shl $4, %rdx            # a stack's upper frames repeat, and the pc
	cmp $WROWS, %rbx        # cache's lines are far apart
	ja walk_hashed
	cmp WALKROWS-16(%rdi,%rdx), %rcx
	jne walk_hashed
	mov WALKROWS-16+8(%rdi,%rdx), %rax
	jmp walk_row
walk_hashed:
	mov %rcx, %rax
	imul hashk(%rip), %rax
	shr $52, %rax
	shl $4, %rax
	lea PCCACHE(%rdi,%rax), %rsi
	cmp (%rsi), %rcx
	jne walk_lookup
	mov 8(%rsi), %rax
walk_keep:                  # the row of this depth, for the next walk
	cmp $WROWS, %rbx
	ja walk_row
	mov %rbx, %rdx
	shl $4, %rdx
	mov %rcx, WALKROWS-16(%rdi,%rdx)
	mov %rax, WALKROWS-16+8(%rdi,%rdx)
walk_row:
	mov %eax, %edx
	and $7, %edx
	cmp $ROWCFA, %edx
	je walk_cfa
	cmp $ROWFP, %edx
	je walk_fp
	cmp $ROWEND, %edx
	je walk_done
	jmp walk_stop           # a row the model cannot follow
# The row's rules: CFA = rsp or rbp + offset, the return address at CFA +
# offset, rbp kept, saved, computed or zero.
walk_cfa:
	mov %r9, %rcx
	test $ROWBASEBP, %eax
	jz 4f
	mov %r10, %rcx
	MEMOBP
4:
	mov %rax, %rdx
	sar $32, %rdx
	add %rdx, %rcx          # the CFA
	cmp %r9, %rcx
	jbe walk_done           # the stack must grow
	mov %rax, %rdx
	sar $8, %rdx
	movsbq %dl, %rdx
	lea (%rcx,%rdx,8), %rdx # the return address's slot
	cmp %r15, %rdx
	jb walk_stop
	mov STACKHI(%rdi), %rsi
	sub $8, %rsi            # no wrap: STACKHI is above r9, itself above 8
	cmp %rsi, %rdx
	ja walk_stop
	mov (%rdx), %r12
	MEMOREC %rdx, %r12
	lea exit(%rip), %rsi    # walk_real's test, inline: most words are
	xor %r12, %rsi          # no exit's
	test $0xfff, %esi
	jnz 3f
	CALLCLEAR walk_real
3:	mov %rax, %rsi
	shr $5, %esi
	and $7, %esi            # rbp's rule
	jz 2f                   # kept
	andq $~MF_RBP0, MEMOF(%rdi) # replaced, whichever rule
	mov %rax, %rdx
	sar $16, %rdx
	movswq %dx, %rdx
	add %rcx, %rdx          # CFA + rbp's offset
	cmp $1, %esi
	je 1f
	xor %r10d, %r10d
	cmp $2, %esi
	cmove %rdx, %r10        # is CFA + offset
	cmp $3, %esi
	cmove %r9, %r10         # the frame's rsp (others: zero)
	jmp 2f
1:	cmp %r15, %rdx          # saved at CFA + offset
	jb walk_stop
	mov STACKHI(%rdi), %rsi
	sub $8, %rsi
	cmp %rsi, %rdx
	ja walk_stop
	mov (%rdx), %r10
	MEMOREC %rdx, %r10
2:	mov %rcx, %r9
	mov %r12, %r8
	xor %r11d, %r11d
	test $ROWSIGNAL, %eax
	setnz %r11b
	test %r8, %r8
	jz walk_done
	jmp walk_frame
# No FDE (or rules Backtrace leaves for it): the rbp chain.
walk_fp:
	MEMOBP
	test %r10, %r10
	jz walk_done
	cmp %r9, %r10
	jb walk_done
	test $7, %r10
	jnz walk_done
	lea 16(%r10), %rcx
	cmp %r10, %rcx
	jb walk_done
	cmp STACKHI(%rdi), %rcx
	ja walk_stop
	lea 8(%r10), %rdx
	mov (%rdx), %r12
	MEMOREC %rdx, %r12
	CALLCLEAR walk_real
	mov (%r10), %rax
	MEMOREC %r10, %rax
	mov %rax, %r10
	andq $~MF_RBP0, MEMOF(%rdi)
	mov %rcx, %r9
	mov %r12, %r8
	xor %r11d, %r11d
	test %r8, %r8
	jz walk_done
	jmp walk_frame

# walk_real: %r12, the word at the slot %rdx, is the real return address
# unless it is a hijacked one, as rtrace's shadowMem reads it: an exit
# address in a slot of the shadow stack is replaced with the real one of
# the first (lowest) frame of that slot. Every code copy starts 16 bytes
# into a mapping of its own (tracer/plant.go, planFuncs): each copy's exit
# has the same low 12 bits, and a word without them is no exit. A word
# that may be another copy's exit in a frame's slot (a stop-path call's
# frame, hijacked with the first copy's), or this copy's exit without a
# frame, stops the walk: rtrace reads it. Clobbers rsi.
walk_real:
	lea exit(%rip), %rsi
	xor %r12, %rsi
	test $0xfff, %esi
	jnz 9f                  # no exit's: a real return address
	orq $MF_NONE, MEMOF(%rdi) # depends on the shadow stack
	push %rax
	xor %esi, %esi
1:	cmp DEPTH(%rdi), %rsi
	jae 3f
	mov %rsi, %rax
	shl $5, %rax
	cmp %rdx, FRAMES+8(%rdi,%rax)
	je 2f
	inc %rsi
	jmp 1b
2:	mov FRAMES(%rdi,%rax), %rax # the frame's real return address
	cmp %rax, %r12
	je 8f                   # put back already
	lea exit(%rip), %rsi
	cmp %rsi, %r12
	jne 4f                  # another copy's exit, or a dead frame's slot reused
	mov %rax, %r12
	jmp 8f
3:	lea exit(%rip), %rsi    # no frame of the slot
	cmp %rsi, %r12
	je 4f
8:	pop %rax
9:	ret
4:	pop %rax
	pop %rsi                # the caller's return: stop from its frame
	movq $0, -8(%rsp)
	jmp walk_stop

# The row of a pc the cache does not hold: the module (the first whose hi
# is above the pc, if its lo is not), then its table's last row starting
# at or below the pc (pc - 1 for a return address), less the bias.
walk_lookup:
	push %rcx
	push %rsi
	mov UNWIND(%rdi), %r12
	test %r12, %r12
	jz walk_notable
	mov (%r12), %rcx        # hi: the modules
	xor %esi, %esi          # lo
1:	cmp %rcx, %rsi
	jae 2f
	lea (%rsi,%rcx), %rax
	shr $1, %rax
	mov %rax, %rdx
	shl $5, %rdx
	cmp %r8, 16(%r12,%rdx)  # its hi above the pc?
	ja 3f
	lea 1(%rax), %rsi
	jmp 1b
3:	mov %rax, %rcx
	jmp 1b
2:	cmp (%r12), %rsi
	jae walk_nomod
	shl $5, %rsi
	lea 8(%r12,%rsi), %rsi  # the module
	cmp %r8, 0(%rsi)
	ja walk_nomod
	mov 24(%rsi), %r12      # its table
	test %r12, %r12
	jz walk_notable
	lea -1(%r8,%r11), %rax
	sub 16(%rsi), %rax      # the link-time address
	mov $0xffffffff, %edx
	cmp %rdx, %rax
	ja walk_nomod
	mov (%r12), %rcx        # hi: the rows
	xor %esi, %esi          # lo
4:	cmp %rcx, %rsi
	jae 5f
	lea (%rsi,%rcx), %rdx
	shr $1, %rdx
	cmp %eax, 8(%r12,%rdx,4) # its start above the address?
	ja 6f
	lea 1(%rdx), %rsi
	jmp 4b
6:	mov %rdx, %rcx
	jmp 4b
5:	test %rsi, %rsi
	jz walk_nomod
	mov (%r12), %rcx
	lea 15(,%rcx,4), %rcx
	and $-8, %rcx
	add %r12, %rcx          # the rows
	mov -8(%rcx,%rsi,8), %rax
	jmp walk_store
walk_nomod:
	xor %eax, %eax          # no module or no row: the rbp chain
walk_store:
	pop %rsi
	pop %rcx
	mov %rcx, (%rsi)
	mov %rax, 8(%rsi)
	jmp walk_keep
walk_notable:
	pop %rsi
	pop %rcx
	jmp walk_stop           # rtrace compiles the module's table

# The module index changed (a library loaded or gone, a table added): the
# pc cache starts over.
walk_flush:
	push %rdi
	push %rcx
	mov %rax, PCGEN(%rdi)
	lea PCCACHE(%rdi), %rdi
	mov $8192, %ecx
	xor %eax, %eax
	rep stosq
	mov 8(%rsp), %rdi
	lea WALKROWS(%rdi), %rdi
	mov $(WROWS * 2), %ecx
	rep stosq
	pop %rcx
	pop %rdi
	jmp walk_frame

# Frame 0 on another stack: rtrace walks it all.
walk_first:
	mov %r8, WALKBUF(%rdi)
	mov $1, %ebx
	xor %r11d, %r11d
# rtrace finishes the walk from the frame in r8-r11 (the last in WALKBUF).
walk_stop:
	orq $MF_NONE, MEMOF(%rdi) # rtrace's part is not in the loads
	mov %rbx, WALKN(%rdi)
	mov %r8, WALKPC(%rdi)
	mov %r9, WALKSP(%rdi)
	mov %r10, WALKBP(%rdi)
	mov %r11, WALKEX(%rdi)
	IFGONE walk_gone        # the frames walked so far: no rtrace to finish
walk_stop_trap:
	int3
walk_gone:
	mov WALKN(%rdi), %rbx
	ret
walk_done:
	mov %rbx, WALKN(%rdi)
	ret

# memo_probe: the walk memo's entry for the walk of %r8-%r10 (as walk
# takes them). Its frames still hold: %eax 1, %rbx the frames, %r12
# their stack cache slot. Otherwise %eax 0, and the entry is emptied for
# the walk that follows to fill (MEMOCUR; memo_commit ends it), r12 and
# rax clobbered. Clobbers rcx, rdx, rsi.
memo_probe:
	mov %r8, %rax
	xor %r9, %rax
	imul hashk(%rip), %rax
	shr $58, %rax           # MEMOS entries
	shl $9, %rax            # of MEMOENT bytes
	lea MEMO(%rdi,%rax), %rsi
	cmp M_PC(%rsi), %r8
	jne memo_miss
	cmp M_SP(%rsi), %r9
	jne memo_miss
	mov UNWIND(%rdi), %rax
	cmp M_UNW(%rsi), %rax
	jne memo_miss
	mov STACKLO(%rdi), %rax
	cmp M_LO(%rsi), %rax
	jne memo_miss
	mov STACKHI(%rdi), %rax
	cmp M_HI(%rsi), %rax
	jne memo_miss
	mov BTDEPTH(%rdi), %rax
	cmp M_DEPTH(%rsi), %rax
	jne memo_miss
	testb $MF_BP, M_FLAGS(%rsi)
	jz 1f
	cmp M_BP(%rsi), %r10
	jne memo_miss
1:	mov M_SLOT(%rsi), %r12
	mov SCGEN(%rdi,%r12,8), %rax
	cmp M_GEN(%rsi), %rax
	jne memo_miss
	mov M_NR(%rsi), %rcx
	lea M_READS(%rsi), %rdx
2:	test %rcx, %rcx
	jz 3f
	mov (%rdx), %rax
	mov (%rax), %rax
	cmp 8(%rdx), %rax
	jne memo_miss
	add $16, %rdx
	dec %rcx
	jmp 2b
3:	movq $0, MEMOCUR(%rdi)
	mov M_N(%rsi), %rbx
	mov $1, %eax
	ret
memo_miss:
	movq $0, M_PC(%rsi)     # nothing, until the walk is done
	mov %r9, M_SP(%rsi)
	mov %r10, M_BP(%rsi)
	mov UNWIND(%rdi), %rax
	mov %rax, M_UNW(%rsi)
	mov STACKLO(%rdi), %rax
	mov %rax, M_LO(%rsi)
	mov STACKHI(%rdi), %rax
	mov %rax, M_HI(%rsi)
	mov BTDEPTH(%rdi), %rax
	mov %rax, M_DEPTH(%rsi)
	mov %rsi, MEMOCUR(%rdi)
	movq $MF_RBP0, MEMOF(%rdi)
	movq $0, MEMON(%rdi)
	xor %eax, %eax
	ret

# memo_commit: the walk memo_probe prepared found %rbx frames, now in
# stack cache slot %r12: its entry holds from now on, unless the walk
# said otherwise (MF_NONE) or the slot did not keep them. Clobbers rax,
# rsi.
memo_commit:
	mov MEMOCUR(%rdi), %rsi
	test %rsi, %rsi
	jz 1f
	movq $0, MEMOCUR(%rdi)
	testb $MF_NONE, MEMOF(%rdi)
	jnz 1f
	test %rbx, %rbx
	jz 1f
	cmp $SCMAX, %rbx
	ja 1f
	mov %rbx, M_N(%rsi)
	mov %r12, M_SLOT(%rsi)
	mov SCGEN(%rdi,%r12,8), %rax
	mov %rax, M_GEN(%rsi)
	mov MEMOF(%rdi), %rax
	mov %rax, M_FLAGS(%rsi)
	mov MEMON(%rdi), %rax
	mov %rax, M_NR(%rsi)
	mov WALKBUF(%rdi), %rax # frame 0, the key: last
	mov %rax, M_PC(%rsi)
1:	ret
