# Resource calls (-e) recorded in the process, included by stub.S: the
# entry of a resource function's stub (res_entry), the return of its frame
# (exit_res, reached from exit) and their ring records. docs/FAST-PATH.md,
# "Resource calls in the process", describes them; tracer/fast/res.go
# decodes the records.
#
# A resource function's descriptor (16 bytes, in the scratch before its
# stub; fast.Desc):
	.set D_FN,    0       # the function's address
	.set D_ID,    8       # u32: rtrace's number for the function (CALL records carry it)
	.set D_FLAGS, 12      # u8: DF_*
	.set D_NARGS, 13      # u8: the arguments a record carries (0-6)
	.set D_OUT,   14      # u8: the argument pointing at the out word (DF_OUT)
	.set DF_REL,  1       # a release whose effect does not depend on its result (free): recorded at its entry, its return left alone
	.set DF_OUT,  2       # the call's record carries the word an argument points at, read when the call returned 0
	.set DF_BT,   4       # the call's record carries its backtrace
	.set DF_ETIME, 8      # a release recorded at its return: its record's time is its entry's
	.set DF_BOTH, 16      # a call that releases and allocates (realloc): its record carries its entry's time too
	.set DF_RELF, 32      # a release recorded at its entry, as DF_REL, whose frame stays for the calls nested in it
#
# Ring records of resource calls (type 2 in a word's low two bits):
#   CALL:  {time, id << 16 | stack slot << 8 | payload records << 4 | HASSTACK? | RESCALL},
#          then the payload, two words a record: the arguments, the result, the out word
#   STACK: {0, frames << 16 | stack slot << 8 | RESSTACK}, then the frames, two a record
# A thread's stacks are cached (SCACHE, by a hash of the frames): a CALL
# whose stack is the slot's names it, and a STACK before it fills the slot
# (the drain keeps the same cache, replayed from the records).
	.set RESCALL,  2
	.set RESSTACK, 6
	.set HASSTACK, 8

# PUT2 appends the records {\t1, \w1} and {\t2, \w2} to the ring, whose
# room for them roomn found (emit's checks, and its HEAD store between
# them, left out): a call of one payload record. Clobbers rax, rcx.
.macro PUT2 t1, w1, t2, w2
	mov HEAD(%rdi), %rcx
	mov %ecx, %eax
	and $(RINGCAP-1), %eax
	shl $4, %eax
	mov \t1, RING(%rdi,%rax)
	mov \w1, RING+8(%rdi,%rax)
	lea 1(%rcx), %eax
	and $(RINGCAP-1), %eax
	shl $4, %eax
	movq \t2, RING(%rdi,%rax)
	movq \w2, RING+8(%rdi,%rax)
	add $2, %rcx
	mov %rcx, HEAD(%rdi)
.endm

# res_entry: called by a resource function's stub with its descriptor in
# %rax, %rax itself saved at -0x10 from the stub's %rsp, as entry is (the
# same frame: entry's ways out serve). (%rsp+8) is the call's return
# address. A call nested in the one being made (realloc's malloc, a
# signal handler's) runs untraced: the frame of the call being made is
# still on the shadow stack and above this call's on the stack, or is
# this call's for a tail call (its slot holds the exit address that
# hijacked it, another module's code copy's maybe: operator delete
# tail-calls free), or below this call's when a signal interrupted it
# (SIGRES) and its handler runs on an alternate stack above it. A frame a jump left without returning is below the
# stack pointer then: the thread's calls are recorded again, and the
# frames below this call's slot are popped (res_dead). The resource calls
# rtrace makes at stops (string arguments) set INRES too (State.SetInRes):
# their nested calls run untraced the same way. A release (DF_REL) writes its record
# at once and leaves its return alone; any other call keeps its arguments
# and descriptor, pushes a FLAGRES frame and hijacks its return: exit_res
# writes its record.
res_entry:
	lea -0x38(%rsp), %rsp
	mov %rcx, 0x28(%rsp)
	mov %rdx, 0x20(%rsp)
	mov %rsi, 0x18(%rsp)
	mov %rdi, 0x10(%rsp)
	mov %r8, 0x08(%rsp)
	mov %rax, %rsi
res_lookup:
	LOOKUP res_miss
	cmpq $0, GUARD(%rdi)
	jne entry_nested
	cmpq $0, UNHOOK(%rdi)
	jne res_unhooked
res_hooked:
	mov INRES(%rdi), %rcx
	test %rcx, %rcx
	jz res_fresh
	mov INRESD(%rdi), %rdx
	cmp DEPTH(%rdi), %rdx
	ja res_stale            # its frame is popped
	shl $5, %rdx
	cmp FRAMES-32+8(%rdi,%rdx), %rcx
	jne res_stale           # another frame there now
	mov FRAMES-32+16(%rdi,%rdx), %rax
	cmp INRESW(%rdi), %rax
	jne res_stale           # another call's, at the same slot and depth
	# Its slot holds the exit that hijacked it, or its return address put
	# back; another call's return address when a jump left it (the call
	# now there is not nested in it). Read on the thread's stack only.
	cmp STACKLO(%rdi), %rcx
	jb 1f
	cmp STACKHI(%rdi), %rcx
	jae 1f
	mov (%rcx), %rax
	cmp INRESX(%rdi), %rax
	je 1f
	cmp FRAMES-32(%rdi,%rdx), %rax
	jne res_stale
1:	lea 0x40(%rsp), %rax    # this call's return address slot
	cmp %rax, %rcx
	ja entry_out            # nested
	jb 2f
	mov INRESX(%rdi), %rdx  # the exit of the copy that hijacked it
	cmp %rdx, (%rax)
	je entry_out            # a tail call of the call being made
	jmp res_stale
2:	cmp SIGRES(%rdi), %rcx  # above it: a handler of a signal that
	je entry_out            # interrupted it, on an alternate stack
res_stale:
	movq $0, INRES(%rdi)    # left without returning
res_fresh:
	movq $1, GUARD(%rdi)
	movq $0, RELSINCE(%rdi) # a release being made is over (or was left)
# Frames a jump left (__builtin_longjmp, a context switch rtrace does not
# follow) go first, as exit_skipped ends them: nothing else would (with
# resource calls only, no outer frame returns through exit), and a return
# must not find them (REHOOK). Dead: the frame at this call's slot unless
# the slot holds an exit (a tail call's caller), and those below it on the
# thread's stack whose slot holds neither an exit nor their return address
# (live frames of a call a signal interrupted, whose handler runs on an
# alternate stack that lies above them, keep theirs). Not from another
# stack, whose place tells nothing of the thread's frames.
	lea 0x40(%rsp), %rax
	cmp STACKLO(%rdi), %rax
	jb res_live
	cmp STACKHI(%rdi), %rax
	ja res_live
res_dead:
	mov DEPTH(%rdi), %rcx
	test %rcx, %rcx
	jz res_live
	dec %rcx
	shl $5, %rcx
	lea FRAMES(%rdi,%rcx), %rcx
	lea 0x40(%rsp), %rax
	cmp 8(%rcx), %rax
	jb res_live             # above this call's slot
	ja 2f
	lea exit(%rip), %rax    # at it: a tail call's caller (the slot holds an
	xor 0x40(%rsp), %rax    # exit, any code copy's: walk_real), else dead
	test $0xfff, %eax
	jz res_live
	jmp 3f
2:	mov STACKLO(%rdi), %rax
	cmp %rax, 8(%rcx)
	jb res_live             # on another stack
	mov 8(%rcx), %rax
	mov (%rax), %rax        # what its slot holds
	cmp 0(%rcx), %rax
	je res_live             # its return address
	lea exit(%rip), %rdx
	xor %rdx, %rax
	test $0xfff, %eax
	jz res_live             # an exit
3:	testq $FLAGRES, 24(%rcx)
	jnz 1f                  # a resource call's: no record
	push %rsi
	CALLCLEAR room
	mov DEPTH(%rdi), %rcx
	dec %rcx
	shl $5, %rcx
	mov FRAMES+16(%rdi,%rcx), %rsi
	or $1, %rsi             # its EXIT, now
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, %r8
	CALLCLEAR emit
	pop %rsi
1:	decq DEPTH(%rdi)
	jmp res_dead
res_live:
	testb $DF_REL, D_FLAGS(%rsi)
	jnz res_release
	testb $DF_RELF, D_FLAGS(%rsi)
	jz res_push
	CALLCLEAR res_record
res_push:
	mov DEPTH(%rdi), %rcx
	cmp $MAXSTACK, %rcx
	jae entry_unguard
	mov %rsi, RESDESC(%rdi)
	mov 0x10(%rsp), %rax
	mov %rax, RESARG(%rdi)
	mov 0x18(%rsp), %rax
	mov %rax, RESARG+8(%rdi)
	mov 0x20(%rsp), %rax
	mov %rax, RESARG+16(%rdi)
	mov 0x28(%rsp), %rax
	mov %rax, RESARG+24(%rdi)
	mov 0x08(%rsp), %rax
	mov %rax, RESARG+32(%rdi)
	mov %r9, RESARG+40(%rdi)
	mov %rcx, %rdx
	shl $5, %rdx
	lea FRAMES(%rdi,%rdx), %rdx
	mov 0x40(%rsp), %rax
	mov %rax, 0(%rdx)       # the real return address
	lea 0x40(%rsp), %rax
	mov %rax, 8(%rdx)       # its slot
	mov %rax, INRES(%rdi)
	movq $0, SIGRES(%rdi)
	mov D_FN(%rsi), %rax
	shl $16, %rax
	mov %rcx, %r8
	shl $2, %r8
	or %r8, %rax
	mov %rax, 16(%rdx)      # the function and depth, as entry's frames
	mov %rax, INRESW(%rdi)
	movq $FLAGRES, 24(%rdx)
	inc %rcx
	mov %rcx, DEPTH(%rdi)
	mov %rcx, INRESD(%rdi)
	testb $(DF_ETIME | DF_BOTH), D_FLAGS(%rsi)
	jz 1f
	NOWTSC                  # a release being made, since: the drain holds
	                        # back the calls made after until its record
	                        # is written (tracer/fast_res.go, relHold)
	mov %rax, RESTSC(%rdi)
	mov %rax, RELSINCE(%rdi)
1:	lea exit(%rip), %rax
	mov %rax, 0x40(%rsp)    # the return goes to exit
	mov %rax, INRESX(%rdi)
	jmp entry_unguard
# A release: its CALL record now (res_record), its return left alone.
res_release:
	CALLCLEAR res_record
	jmp entry_unguard
# res_record writes the CALL record of the release res_entry's frame (0x48
# from here) holds, the pointer its payload; none for free(NULL).
# Preserves rsi (the descriptor).
res_record:
	cmpq $0, 0x18(%rsp)
	je 2f
	push %rsi
	movq $2, ROOMNEED(%rdi)
	CALLCLEAR roomn
	mov HEAD(%rdi), %rax
	sub CTAIL(%rdi), %rax   # roomn read TAIL when CTAIL had no room
	add $2, %rax
	cmp $RINGCAP, %rax
	ja 1f
	NOWTSC
	mov %rax, %r8
	mov D_ID(%rsi), %esi
	shl $16, %rsi
	or $(1 << 4 | RESCALL), %rsi
	mov 0x20(%rsp), %rdx
	PUT2 %r8, %rsi, %rdx, $0
	pop %rsi
2:	ret
1:	incq RESLOST(%rdi)      # no room (a stalled ring)
	pop %rsi
	ret
res_miss:
	IFGONE entry_out        # untraced: no rtrace to register the thread
res_miss_trap:
	int3                    # rtrace registers the thread (key in %rcx)
	jmp res_miss_retry
res_unhooked:
	IFGONE entry_out        # untraced from here on: UNHOOK stays
res_unhooked_trap:
	int3                    # rtrace drops the frames an exception unwound
	jmp res_hooked

# exit_res: the return of a resource call's frame (FLAGRES), from
# exit_pop: %rcx is the frame, %r8 the time, 0x38(%rsp) the real return
# address, 0x40(%rsp) the caller's stack pointer. Pops the frame, writes
# the call's record, with its backtrace (walk) for DF_BT, and returns as
# exit does.
exit_res:
	decq DEPTH(%rdi)
	movq $0, INRES(%rdi)
	push %rbx
	push %r9
	push %r10
	push %r11
	push %r12
	push %r13
	push %r14
	push %r15
	.set XF, 0x40           # exit's frame, past the pushes
	mov %r8, %r14           # the time: the return's
	mov RESDESC(%rdi), %r13
	testb $DF_RELF, D_FLAGS(%r13)
	jnz res_done            # recorded at its entry
	testb $DF_ETIME, D_FLAGS(%r13)
	jz 1f
	mov RESTSC(%rdi), %r14  # or the entry's
1:
	# The payload words: the arguments, the result, the out word.
	movzbl D_NARGS(%r13), %ecx
	xor %eax, %eax
1:	cmp %rcx, %rax
	jae 2f
	mov RESARG(%rdi,%rax,8), %rdx
	mov %rdx, RESPAY(%rdi,%rax,8)
	inc %rax
	jmp 1b
2:	mov XF+0x30(%rsp), %rdx # the result
	mov %rdx, RESPAY(%rdi,%rax,8)
	inc %rax
	testb $DF_OUT, D_FLAGS(%r13)
	jz 3f
	xor %esi, %esi
	test %edx, %edx         # read only once the call succeeded
	jnz 4f
	movzbl D_OUT(%r13), %esi
	mov RESARG(%rdi,%rsi,8), %rsi
	mov (%rsi), %rsi
4:	mov %rsi, RESPAY(%rdi,%rax,8)
	inc %rax
3:	testb $DF_BOTH, D_FLAGS(%r13)
	jz 5f
	mov RESTSC(%rdi), %rdx  # the entry's time: its releases'
	mov %rdx, RESPAY(%rdi,%rax,8)
	inc %rax
5:	mov %rax, %r15          # payload words
	xor %ebx, %ebx          # frames
	testb $DF_BT, D_FLAGS(%r13)
	jz 5f
	mov XF+0x38(%rsp), %r8  # frame 0: the call's return address
	lea XF+0x40(%rsp), %r9  # the caller's stack pointer
	mov %rbp, %r10
	push %r15
	CALLCLEAR memo_probe    # the walk's frames, known (walk.S)
	test %eax, %eax
	jnz 18f
	CALLCLEAR walk
	pop %r15
5:	# The stack cache: r12 the slot, r11 set for a miss (a STACK first).
	xor %r12d, %r12d
	xor %r11d, %r11d
	test %rbx, %rbx
	jz 6f
	# The hash: the frames rotated in (a step's latency one cycle
	# each, where a multiply a frame cost three), mixed once.
	mov %rbx, %rax
	xor %ecx, %ecx
7:	rol $21, %rax
	xor WALKBUF(%rdi,%rcx,8), %rax
	inc %rcx
	cmp %rbx, %rcx
	jb 7b
	imul hashk(%rip), %rax
	mov %rax, %r10          # the hash
	shr $56, %rax
	mov %rax, %r12
	imul $SCENT, %rax, %rsi
	lea SCACHE(%rdi,%rsi), %rsi
	mov $1, %r11d
	cmp %r10, (%rsi)
	jne 6f
	cmp %rbx, 8(%rsi)
	jne 6f
	xor %ecx, %ecx
8:	mov WALKBUF(%rdi,%rcx,8), %rax
	cmp 16(%rsi,%rcx,8), %rax
	jne 6f
	inc %rcx
	cmp %rbx, %rcx
	jb 8b
	xor %r11d, %r11d        # a hit
	jmp 6f
18:	pop %r15                # the memo's frames: a hit
	xor %r11d, %r11d
6:	# Room for the CALL and its payload, and a miss's STACK.
	lea 1(%r15), %rax
	shr $1, %rax
	inc %rax
	test %r11, %r11
	jz 9f
	lea 1(%rbx), %rcx
	shr $1, %rcx
	lea 1(%rax,%rcx), %rax
9:	mov %rax, ROOMNEED(%rdi)
	CALLCLEAR roomn
	mov HEAD(%rdi), %rax
	sub CTAIL(%rdi), %rax   # roomn read TAIL when CTAIL had no room
	add ROOMNEED(%rdi), %rax
	cmp $RINGCAP, %rax
	ja res_lost
	test %r11, %r11
	jz 10f
	# A miss: the slot takes the stack (one deeper than SCMAX is not
	# kept: the next one misses again), and the drain learns it.
	movq $0, 8(%rsi)
	incq SCGEN(%rdi,%r12,8) # memos naming the slot's old stack end
	cmp $SCMAX, %rbx
	ja 16f
	mov %r10, (%rsi)
	mov %rbx, 8(%rsi)
	xor %ecx, %ecx
17:	mov WALKBUF(%rdi,%rcx,8), %rax
	mov %rax, 16(%rsi,%rcx,8)
	inc %rcx
	cmp %rbx, %rcx
	jb 17b
16:	xor %r8d, %r8d
	mov %rbx, %rsi
	shl $16, %rsi
	mov %r12, %rax
	shl $8, %rax
	or %rax, %rsi
	or $RESSTACK, %rsi
	CALLCLEAR emit
	xor %r9d, %r9d
11:	cmp %rbx, %r9
	jae 10f
	mov WALKBUF(%rdi,%r9,8), %r8
	xor %esi, %esi
	lea 1(%r9), %rax
	cmp %rbx, %rax
	jae 12f
	mov WALKBUF+8(%rdi,%r9,8), %rsi
12:	CALLCLEAR emit
	add $2, %r9
	jmp 11b
10:	CALLCLEAR memo_commit
	mov %r14, %r8
	mov D_ID(%r13), %esi
	shl $16, %rsi
	mov %r12, %rax
	shl $8, %rax
	or %rax, %rsi
	lea 1(%r15), %rax
	shr $1, %rax
	shl $4, %rax
	or %rax, %rsi
	test %rbx, %rbx
	jz 13f
	or $HASSTACK, %rsi
13:	or $RESCALL, %rsi
	cmp $2, %r15
	ja 19f
	mov RESPAY(%rdi), %r9   # one payload record (malloc's): at once
	xor %r10d, %r10d
	cmp $2, %r15
	jb 20f
	mov RESPAY+8(%rdi), %r10
20:	PUT2 %r8, %rsi, %r9, %r10
	jmp res_done
19:	CALLCLEAR emit
	xor %r9d, %r9d
14:	cmp %r15, %r9
	jae res_done
	mov RESPAY(%rdi,%r9,8), %r8
	xor %esi, %esi
	lea 1(%r9), %rax
	cmp %r15, %rax
	jae 15f
	mov RESPAY+8(%rdi,%r9,8), %rsi
15:	CALLCLEAR emit
	add $2, %r9
	jmp 14b
res_lost:
	incq RESLOST(%rdi)      # no room (a stalled ring): the slot keeps its stack
	movq $0, MEMOCUR(%rdi)  # and the walk memo's entry stays empty
res_done:
	movq $0, RELSINCE(%rdi) # its record is written
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %r11
	pop %r10
	pop %r9
	pop %rbx
	# No REHOOK: res_entry did not put its caller's return address back,
	# and a frame below this one may be a dead one a jump left.
	EXIT_RESTORE
	EXIT_WIPE
	lea 8(%rsp), %rsp
	jmp *-8(%rsp)
