# The fast engine's shared code, written once at the start of every scratch
# mapping rtrace makes in a traced process (tracer/fast/blob.go holds its
# bytes; TestBlobMatchesSource reassembles this file and compares). Layout
# and protocol: docs/FAST-PATH.md in this repository.
#
# Frame flags (a shadow-stack frame's fourth word):
	.set FLAGSTOP, 1      # its return stops at exit_stop_trap (a value to record)
	.set FLAGRES,  2      # a resource call's: its return writes the call's record (res.S), no EXIT
	.set FLAGRET,  4      # its return writes a RET group (the return value) before the EXIT
#
# Per-thread state (one memfd mapping per thread, shared with rtrace):
	.set GUARD,   0x00    # nonzero while a stub of this thread writes state
	.set DEPTH,   0x08    # frames on the shadow stack
	.set UNHOOK,  0x10    # nonzero while an exception unwinds the stack
	.set SHARED,  0x18    # nonzero while a vfork child writes it too: no auto-recover
	.set WATCH,   0x20    # nonzero: record the CPU when it changes (-W cpu)
	.set LASTCPU, 0x28    # the CPU of the thread's last call or return, plus 1 (0: none yet)
	.set REAL,    0x30    # nonzero while the real return addresses must stay (a backtrace walks)
	.set CTAIL,   0x38    # TAIL as the thread last read it: room is checked against it first
	.set HEAD,    0x40    # ring records written (producer: the thread)
	.set TAIL,    0x80    # ring records read (consumer: rtrace)
	.set LOST,    0xc0    # records dropped on a full ring
	.set STALL,   0xc8    # nonzero: a wait for room timed out; rtrace clears it
	.set HELD,    0xd0    # nonzero: rtrace holds signals until the guard clears
	.set WAITING, 0xd8    # nonzero: the thread sleeps on TAIL (futex); rtrace wakes it
	.set INRES,   0xe0    # the return address slot of the resource call being made (0: none)
	.set INRESD,  0xe8    # its frame's depth on the shadow stack, plus 1
	.set STACKLO, 0xf0    # the thread's stack: a walk starts in [STACKLO, STACKHI]
	.set STACKHI, 0xf8    # and loads below STACKHI only
	.set UNWIND,  0x100   # the walker's module index (rtrace writes it; 0: none, walks stop)
	.set BTDEPTH, 0x108   # frames per backtrace (-b)
	.set PCGEN,   0x110   # the UNWIND the pc cache was filled with
	.set RESDESC, 0x118   # the descriptor of the resource call being made
	.set RESARG,  0x120   # its arguments: rdi, rsi, rdx, rcx, r8, r9
	.set ROOMNEED, 0x150  # records roomn waits for
	.set RESLOST, 0x158   # resource calls dropped on a full ring
	.set WALKN,   0x160   # frames in WALKBUF
	.set WALKPC,  0x168   # the frame a walk stopped at: pc, sp, rbp, exact
	.set WALKSP,  0x170
	.set WALKBP,  0x178
	.set WALKEX,  0x180
	.set RESPAY,  0x188   # a resource call's record payload: 8 words
	.set INRESX,  0x1c8   # the exit address that hijacked INRES's slot (this code copy's)
	.set RESTSC,  0x1d0   # the TSC at its entry (DF_ETIME, DF_BOTH)
	.set INRESW,  0x1d8   # its frame's word (function and depth): another call at its slot and depth is not it
	.set RELSINCE, 0x1e0  # nonzero: a release is being made since this TSC, its record not written yet
	.set SIGRES,  0x1e8   # the INRES a signal interrupted (rtrace sets it as it delivers one)
	.set COARSE,  0x1f0   # nonzero: resource calls take this time, rtrace's drain's clock, not rdtsc
	.set MEMOCUR, 0x1f8   # the walk memo entry a walk fills (walk.S, "The walk memo"; 0: none)
	.set MEMOF,   0x200   # its flags as the walk goes: MF_*
	.set MEMON,   0x208   # the loads it recorded
	.set WALKROWS, 0x400  # the unwind row of each of the last walk's first WROWS frames: {pc * 2 + exact, row}
	.set WROWS,   32
	.set WALKBUF, 0x800   # the frames of a walk (WALKMAX)
	.set WALKMAX, 256
	.set SPIN,    0x100   # pauses before a wait for room sleeps
	.set WAIT,    0x80000000 # TSC ticks a record waits for room at most (~1 s)
	.set FRAMES,  0x1000  # shadow stack: {ret, slot, word, flags} per frame
	.set MAXSTACK, 4096
	.set RING,    0x21000 # ring: {tsc, word} per record
	.set RINGCAP, 0x10000
	.set SCACHE,  0x121000 # stack cache: 256 x {hash, frames, SCMAX frames}
	.set SCENT,   0x110
	.set SCMAX,   32
	.set PCCACHE, 0x132000 # pc -> unwind row cache: 4096 x {pc * 2 + exact, row}
	.set SCGEN,   0x142000 # a generation per stack cache slot: its stack changed
	.set MEMO,    0x143000 # the walk memo: MEMOS entries of MEMOENT bytes (walk.S)
	.set TMASK,   0xffff0 # thread table: 65536 {key, state} entries
	.set WATCHCPU, 100011 # uftrace's EVENT_ID_WATCH_CPU: its ring word's address holds the CPU << 20 too

	.text
consts:
table:	.quad 0                     # the thread table's address (rtrace writes it)
hashk:	.quad 0x9E3779B97F4A7C15
nap:	.quad 0, 1000000            # a futex wait's timeout: 1 ms
alive:	.quad 0                     # rtrace's lifeline word (0: none; rtrace writes it)
	.quad 0
# saved: the registers of the thread rtrace makes run a system call at
# gadget, which rtrace writes before it (fast.Saved* order).
saved:	.quad 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
	.set SV_RIP, 0x00
	.set SV_RSP, 0x08
	.set SV_FLAGS, 0x10
	.set SV_RAX, 0x18
	.set SV_RBX, 0x20
	.set SV_RCX, 0x28
	.set SV_RDX, 0x30
	.set SV_RSI, 0x38
	.set SV_RDI, 0x40
	.set SV_RBP, 0x48
	.set SV_R8, 0x50
	.set SV_R9, 0x58
	.set SV_R10, 0x60
	.set SV_R11, 0x68
	.set SV_R12, 0x70
	.set SV_R13, 0x78
	.set SV_R14, 0x80
	.set SV_R15, 0x88

# IFGONE jumps to \gone when rtrace is gone: the kernel marked its
# lifeline word (a robust futex rtrace's keeper thread owns, in memory it
# shares with the process: FUTEX_OWNER_DIED, futex(2)) as it died. A site
# whose int3 would stop for rtrace goes on without it instead
# (docs/RELIABILITY.md, "rtrace killed"). Clobbers rax.
.macro IFGONE gone
	mov alive(%rip), %rax
	test %rax, %rax
	jz 9f
	testl $0x40000000, (%rax)
	jnz \gone
9:
.endm

# gadget: a system call rtrace makes the thread run (remoteSyscallAt),
# then an int3 for rtrace to read its result and put the thread back as
# it was. Should rtrace die meanwhile (its lifeline word says so), the
# thread puts itself back (resume) instead of trapping: the registers
# rtrace saved are in saved. The flags go through the stack, below the
# red zone, where a signal frame would go.
gadget:
	syscall
gadget_done:
	mov alive(%rip), %rcx   # the system call clobbered rcx and r11 already
	test %rcx, %rcx
	jz gadget_trap
	testl $0x40000000, (%rcx)
	jnz resume
gadget_trap:
	int3
resume:
	mov saved+SV_RSP(%rip), %rsp
	lea -136(%rsp), %rsp
	pushq saved+SV_FLAGS(%rip)
	popfq
	lea 136(%rsp), %rsp
	mov saved+SV_RAX(%rip), %rax
	mov saved+SV_RBX(%rip), %rbx
	mov saved+SV_RCX(%rip), %rcx
	mov saved+SV_RDX(%rip), %rdx
	mov saved+SV_RSI(%rip), %rsi
	mov saved+SV_RDI(%rip), %rdi
	mov saved+SV_RBP(%rip), %rbp
	mov saved+SV_R8(%rip), %r8
	mov saved+SV_R9(%rip), %r9
	mov saved+SV_R10(%rip), %r10
	mov saved+SV_R11(%rip), %r11
	mov saved+SV_R12(%rip), %r12
	mov saved+SV_R13(%rip), %r13
	mov saved+SV_R14(%rip), %r14
	mov saved+SV_R15(%rip), %r15
	jmp *saved+SV_RIP(%rip)

# newstates: the system calls that make a thread state's memory
# (fastImage.newStates), run as the gadget runs one, so one stop instead
# of four: memfd_create(rdi, MFD_CLOEXEC), ftruncate(fd, rsi),
# mmap(0, rsi, PROT_READ|PROT_WRITE, rdx, fd, 0), madvise(the mapping, rsi,
# MADV_DONTFORK) (its failure ignored, as before), then gadget's ending:
# rax the mapping, or the first failure's -errno; r12 the file
# descriptor, which rtrace opens through /proc and then closes, or
# memfd_create's -errno; r15 the step that failed (1 ftruncate, 2 mmap).
# rtrace gone meanwhile, the descriptor stays open (close-on-exec) and the
# mapping mapped.
newstates:
	mov %rsi, %r13
	mov %rdx, %r14
	mov $319, %eax          # memfd_create
	mov $1, %esi            # MFD_CLOEXEC
	syscall
	mov %rax, %r12
	test %rax, %rax
	js gadget_done
	mov $1, %r15d
	mov $77, %eax           # ftruncate
	mov %r12, %rdi
	mov %r13, %rsi
	syscall
	test %rax, %rax
	js gadget_done
	mov $2, %r15d
	mov $9, %eax            # mmap
	xor %edi, %edi
	mov %r13, %rsi
	mov $3, %edx            # PROT_READ|PROT_WRITE
	mov %r14, %r10
	mov %r12, %r8
	xor %r9d, %r9d
	syscall
	cmp $-4095, %rax
	jae gadget_done
	mov %rax, %r15
	mov $28, %eax           # madvise
	mov %r15, %rdi
	mov %r13, %rsi
	mov $10, %edx           # MADV_DONTFORK
	syscall
	mov %r15, %rax
	jmp gadget_done

# CALLCLEAR calls \fn, then clears the return address the call left below the
# stack pointer: no address of rtrace's code stays on a stack (a detach
# takes any it finds for a live one).
.macro CALLCLEAR fn
	call \fn
	movq $0, -8(%rsp)
.endm

# NOWTSC leaves in %rax the time of a resource call's record: COARSE when
# rtrace keeps it (a process of one thread recording resource calls only:
# its drain writes its clock there each round, within a millisecond of
# the TSC, and rdtsc costs 10-16 ns here; docs/FAST-PATH.md, "The coarse
# clock"), else the TSC, read by rdtscp: once every instruction before it
# has executed and its loads are globally visible (Intel SDM vol. 2 and
# AMD APM vol. 3, RDTSCP). rdtsc may read the counter before the loads
# that precede it are done: a release of a block another thread handed
# over (through a queue, a lock) could read a time before that thread's
# allocation of it, and the drain, which merges the threads' calls by
# their times, would report them out of order (docs/FAST-PATH.md,
# "Resource calls in time order"). Clobbers rcx, rdx.
.macro NOWTSC
	mov COARSE(%rdi), %rax
	test %rax, %rax
	jnz .Lnow\@
	rdtscp
	shl $32, %rdx
	or %rdx, %rax
.Lnow\@:
.endm

# UNGUARD ends a critical section. A signal that came meanwhile was held
# by rtrace (its handler would have found the guard set and gone
# untraced): held, called here, stops for rtrace to deliver it. Clobbers
# the status flags.
.macro UNGUARD
	movq $0, GUARD(%rdi)
	cmpq $0, HELD(%rdi)
	je 1f
	CALLCLEAR held
1:
.endm

# EXIT_RESTORE ends the exit stub's critical section and puts back the
# registers it saved: the stack pointer is then at the return slot the
# ret consumed. The saved result is wiped from the stack, as CALLCLEAR
# wipes return addresses: a copy of a pointer a function returned, left
# below its caller's frame, could outlive the pointer and make a leaked
# block look reachable to the memory scan at exit (docs/REPORTS.md, "Leak
# kinds"); EXIT_WIPE wipes the other saved registers too.
.macro EXIT_RESTORE
	UNGUARD
	mov 0x30(%rsp), %rax
	movq $0, 0x30(%rsp)
	mov 0x28(%rsp), %rdx
	mov 0x20(%rsp), %rcx
	mov 0x18(%rsp), %rsi
	mov 0x10(%rsp), %rdi
	mov 0x08(%rsp), %r8
	lea 0x38(%rsp), %rsp
.endm

# EXIT_WIPE, after EXIT_RESTORE, wipes the scratch registers the exit
# stub saved (rdx, rcx, rsi, rdi, r8): at a resource call's return, what
# the allocator left in them (the block, its chunk) would otherwise stay
# on the stack, where a native call leaves nothing.
.macro EXIT_WIPE
	movq $0, -0x10(%rsp)
	movq $0, -0x18(%rsp)
	movq $0, -0x20(%rsp)
	movq $0, -0x28(%rsp)
	movq $0, -0x30(%rsp)
.endm

# REHOOK aims the return of the frame now on top of the shadow stack of
# state %rdi, if any, at exit again: the entry of the callee that just
# returned put its real return address back (entry's auto-recover). Not
# while an exception unwinds or a backtrace walks (UNHOOK, REAL): they
# read the real ones (a destructor called from a landing pad, or a signal
# handler's call, returns meanwhile). Only into a slot above the one the
# ret consumed (0x38 in exit's frame): the same slot is a tail call's,
# already exit's; one below it belongs to a frame a jump left, dead, whose
# memory is the live code's now. And only over what rtrace left there: an
# exit, or the return address entry_recover put back (the frame's own, or
# for a tail-called frame, whose return address is an exit, the one of
# the frame below it at the same slot); a frame a jump left may be above
# too (__builtin_longjmp to a shallower frame, then deeper calls), its
# slot another call's now. Clobbers rax, rcx.
.macro REHOOK
	cmpq $0, UNHOOK(%rdi)
	jne 1f
	cmpq $0, REAL(%rdi)
	jne 1f
	mov DEPTH(%rdi), %rcx
	test %rcx, %rcx
	jz 1f
	dec %rcx
	shl $5, %rcx
	lea FRAMES(%rdi,%rcx), %rcx
	lea 0x38(%rsp), %rax
	cmp %rax, 8(%rcx)
	jbe 1f
	push %rdx
	mov 8(%rcx), %rdx       # the slot
2:	mov 0(%rcx), %rax
	cmp %rax, (%rdx)
	je 3f                   # the frame's return address (or its exit)
	lea exit(%rip), %rax
	xor 0(%rcx), %rax
	test $0xfff, %eax
	jnz 4f                  # not what rtrace left
	lea FRAMES(%rdi), %rax  # a tail-called frame: the one below, at the same slot
	cmp %rax, %rcx
	jbe 4f
	cmp -32+8(%rcx), %rdx
	jne 4f
	sub $32, %rcx
	jmp 2b
3:	lea exit(%rip), %rax
	mov %rax, (%rdx)
4:	pop %rdx
1:
.endm

# LOOKUP leaves the calling thread's state in %rdi (clobbers rax, rcx, rdx),
# or jumps to \miss with its key in %rcx. The key is the %fs base: the first
# instruction becomes rdfsbase %rcx where the kernel allows it.
.macro LOOKUP miss
	mov %fs:0, %rcx
\miss\()_retry:
	mov %rcx, %rax
	imul hashk(%rip), %rax
	shr $48, %rax
	shl $4, %rax
	mov table(%rip), %rdx
1:	mov (%rdx,%rax), %rdi
	test %rdi, %rdi
	jz \miss
	cmp %rdi, %rcx
	je 2f
	add $16, %rax
	and $TMASK, %rax
	jmp 1b
2:	mov 8(%rdx,%rax), %rdi
.endm

# entry: called by a function's stub with the function's address in %rax,
# %rax itself saved at -0x10 from the stub's %rsp. (%rsp+8) is the traced
# call's return address. Pushes a frame, hijacks the return to exit, puts
# the caller's real return address back (auto-recover: only the innermost
# frame's return is exit's, so a walk of the stack finds the callers',
# as uftrace's mcount_auto_restore does; exit hijacks it again), writes
# the ENTRY record. Preserves every register but %rax (the stub restores
# it); the status flags are not preserved (undefined at a call's entry and
# return in the psABI).
#
# entry_args: the same for a function whose arguments or return value the
# stub records (-A/-R), called with its descriptor (args.S) in %rax,
# marked by the top bit (0x00 in entry's frame keeps it).
entry_args:
	bts $63, %rax
entry:
	lea -0x38(%rsp), %rsp
	mov %rcx, 0x28(%rsp)
	mov %rdx, 0x20(%rsp)
	mov %rsi, 0x18(%rsp)
	mov %rdi, 0x10(%rsp)
	mov %r8, 0x08(%rsp)
	mov %rax, %rsi
	mov %rax, (%rsp)
entry_lookup:
	LOOKUP entry_miss
	cmpq $0, GUARD(%rdi)
	jne entry_nested
	cmpq $0, UNHOOK(%rdi)
	jne entry_unhooked
entry_hooked:
	movq $1, GUARD(%rdi)
	test %rsi, %rsi
	js entry_argroom
	CALLCLEAR room
entry_fn:
	mov DEPTH(%rdi), %rcx
	cmp $MAXSTACK, %rcx
	jae entry_unguard
	shl $16, %rsi
	mov %rcx, %rax
	shl $2, %rax
	or %rax, %rsi
	mov %rcx, %rdx
	shl $5, %rdx
	lea FRAMES(%rdi,%rdx), %rdx
	mov 0x40(%rsp), %rax
	mov %rax, 0(%rdx)
	lea 0x40(%rsp), %rax
	mov %rax, 8(%rdx)
	mov %rsi, 16(%rdx)
	movq $0, 24(%rdx)
	lea exit(%rip), %rax
	mov %rax, 0x40(%rsp)
	inc %rcx
	mov %rcx, DEPTH(%rdi)
	cmp $2, %rcx
	jb entry_record         # no caller's frame
	cmpq $0, SHARED(%rdi)
	jne entry_record        # a vfork child's caller may be its parent's
	cmpq $0, UNHOOK(%rdi)
	jne entry_record        # the real ones are there, and no return re-hooks (REHOOK)
	cmpq $0, REAL(%rdi)
	jne entry_record
	lea -32(%rdx), %rax     # the caller's frame
	mov 8(%rdx), %r8
	cmp 8(%rax), %r8
	jae entry_record        # its slot is ours (a tail call: exit's) or below it (dead: REHOOK)
	lea exit(%rip), %r8
	lea FRAMES(%rdi), %rcx
entry_recover:
	mov 0(%rax), %rdx
	cmp %r8, %rdx
	jne 1f
	sub $32, %rax           # the caller was tail-called: its caller's address
	cmp %rcx, %rax
	jae entry_recover
	jmp entry_record
1:	mov 8(%rax), %rax
	lea 0x40(%rsp), %rcx    # our slot
	cmp %rcx, %rax
	jbe entry_record
	mov (%rax), %rcx        # an exit's address (any code copy's: walk_real) but for
	xor %r8, %rcx           # a frame a jump left, whose slot is a live frame's now
	test $0xfff, %ecx
	jnz entry_record
	mov %rdx, (%rax)
entry_record:
	cmpq $0, (%rsp)
	js entry_argrec
entry_time:
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, %r8
	cmpq $0, WATCH(%rdi)
	jne entry_watch
entry_emit:
	CALLCLEAR emit
entry_unguard:
	UNGUARD
entry_out:
	mov 0x28(%rsp), %rcx
	mov 0x20(%rsp), %rdx
	mov 0x18(%rsp), %rsi
	mov 0x10(%rsp), %rdi
	mov 0x08(%rsp), %r8
	lea 0x38(%rsp), %rsp
	ret
# A call inside a critical section (a handler of a signal rtrace did not
# hold interrupted it) goes untraced; a signal held since is delivered.
entry_nested:
	cmpq $0, HELD(%rdi)
	je entry_out
	CALLCLEAR held
	jmp entry_out
entry_miss:
	IFGONE entry_out        # untraced: no rtrace to register the thread
entry_miss_trap:
	int3                    # rtrace registers the thread (key in %rcx)
	jmp entry_miss_retry
entry_unhooked:
	IFGONE entry_out        # untraced from here on: UNHOOK stays
entry_unhooked_trap:
	int3                    # rtrace drops the frames an exception unwound
	jmp entry_hooked

# WATCHWORD makes %rsi the ring word of a watch event for CPU %rcx + 1 at
# the depth in %rsi's bits 2-15 (uftrace's watch events carry the CPU as
# data: rtrace's drain takes it out of the address). Clobbers rcx.
.macro WATCHWORD
	dec %rcx
	shl $20, %rcx
	or $WATCHCPU, %rcx
	shl $16, %rcx
	and $0xfffc, %rsi
	or %rcx, %rsi
	or $3, %rsi
.endm

# entry_watch (-W cpu): the CPU the thread runs on (rdtscp's TSC_AUX,
# which Linux sets to cpu | node << 12), recorded when it is not the one
# of the thread's last call or return: a watch event just before the
# ENTRY, or for the thread's first, just after it (uftrace's
# save_watchpoint, libmcount/record.c).
entry_watch:
	rdtscp
	and $0xfff, %ecx
	inc %rcx
	mov LASTCPU(%rdi), %rax
	cmp %rax, %rcx
	je entry_emit
	mov %rcx, LASTCPU(%rdi)
	push %rsi               # the ENTRY
	push %r8
	WATCHWORD
	test %rax, %rax
	jz 1f
	dec %r8
	CALLCLEAR emit
	pop %r8
	pop %rsi
	jmp entry_emit
1:	add $4, %rsi            # the watch, inside the call (depth + 1)
	push %rsi
	mov 16(%rsp), %rsi
	CALLCLEAR emit          # the ENTRY
	pop %rsi
	inc %r8
	CALLCLEAR emit
	pop %r8
	pop %rsi
	jmp entry_unguard

# room waits until the ring of state %rdi has room for two records (a
# watch event and the ENTRY or EXIT, -W cpu); roomn for ROOMNEED records
# (a resource call's). SPIN
# pauses, then sleeping on the ring's tail (a futex rtrace wakes when it
# drains: a CPU spent spinning is one the drainer lacks when threads
# outnumber CPUs), for WAIT ticks at most, after which it marks the state
# stalled; a stalled state does not wait (rtrace clears the flag when it
# drains). Entry and exit wait here before they change the shadow stack,
# so a thread killed while it waits (exit_group) leaves its state
# consistent. Clobbers rax, rcx, rdx, r8.
room:
	movq $2, ROOMNEED(%rdi)
roomn:
	mov HEAD(%rdi), %rcx
	mov %rcx, %rax
	sub CTAIL(%rdi), %rax
	add ROOMNEED(%rdi), %rax
	cmp $RINGCAP, %rax
	jbe 1f                  # room by the tail last read: TAIL's line,
	mov TAIL(%rdi), %rax    # which rtrace writes, is read only when not
	mov %rax, CTAIL(%rdi)
	mov %rcx, %rax
	sub CTAIL(%rdi), %rax
	add ROOMNEED(%rdi), %rax
	cmp $RINGCAP, %rax
	jbe 1f
	cmpq $0, STALL(%rdi)
	jne 1f
	IFGONE 4f               # nothing drains the ring any more
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov $WAIT, %r8d
	add %rax, %r8           # the deadline
	mov $SPIN, %edx
2:	pause
	cmpq $0, STALL(%rdi)    # rtrace gave up on this ring (a detach)
	jne 1f
	push %rax
	IFGONE 5f               # rtrace died meanwhile
	pop %rax
	mov TAIL(%rdi), %rax    # CTAIL follows: the callers check room
	mov %rax, CTAIL(%rdi)   # against it once this returns
	mov HEAD(%rdi), %rcx
	neg %rax
	add %rcx, %rax
	add ROOMNEED(%rdi), %rax
	cmp $RINGCAP, %rax
	jbe 1f
	dec %edx
	jnz 2b
	push %r11
	push %r10
	push %rsi
	push %rdi
	mov $1, %eax
	xchg %rax, WAITING(%rdi) # a full barrier: rtrace sees WAITING or we see its tail
	mov TAIL(%rdi), %rdx    # the value the futex sleeps on (its low 32 bits)
	mov HEAD(%rdi), %rax
	sub %rdx, %rax
	add ROOMNEED(%rdi), %rax
	cmp $RINGCAP, %rax
	jbe 3f                  # drained meanwhile
	lea TAIL(%rdi), %rdi
	xor %esi, %esi          # FUTEX_WAIT, shared: rtrace maps the state too
	lea nap(%rip), %r10
	mov $202, %eax          # futex (clobbers rcx, r11)
	syscall
3:	pop %rdi
	pop %rsi
	pop %r10
	pop %r11
	rdtsc
	shl $32, %rdx
	or %rdx, %rax
	mov $1, %edx            # from now on, sleep after every check
	cmp %r8, %rax
	jb 2b
	movq $1, STALL(%rdi)
1:	ret
5:	pop %rax
4:	movq $1, STALL(%rdi)    # its records are dropped from now on
	ret

# held: a signal came while the guard was set, and rtrace holds it. The
# int3 stops for rtrace to deliver one held signal; it clears HELD with
# the last.
held:
	push %rax               # it may hold exit's address (REHOOK): cleared
	IFGONE held_gone        # from the stack once popped, as CALLCLEAR does
	pop %rax
	movq $0, -8(%rsp)
held_trap:
	int3
	cmpq $0, HELD(%rdi)
	jne held
	ret
held_gone:                      # the signals rtrace held died with it
	pop %rax
	movq $0, -8(%rsp)
	movq $0, HELD(%rdi)
	ret

# emit appends the record {%r8, %rsi} to the ring of state %rdi, or counts
# it lost when the ring is full (room waited already). Clobbers rax, rcx,
# rdx.
emit:
	mov HEAD(%rdi), %rcx
	mov %rcx, %rax
	sub CTAIL(%rdi), %rax
	cmp $RINGCAP, %rax
	jb 1f
	mov TAIL(%rdi), %rax    # full by the tail last read: read it again
	mov %rax, CTAIL(%rdi)
	mov %rcx, %rax
	sub CTAIL(%rdi), %rax
	cmp $RINGCAP, %rax
	jae 2f
1:	mov %rcx, %rax
	and $(RINGCAP-1), %rax
	shl $4, %rax
	mov %r8, RING(%rdi,%rax)
	mov %rsi, RING+8(%rdi,%rax)
	inc %rcx
	mov %rcx, HEAD(%rdi)
	ret
2:	incq LOST(%rdi)
	ret

# exit: where a hijacked return lands. Pops the frame whose return address
# slot the ret consumed (closing first the frames below it that longjmp or
# unwinding skipped), writes their EXIT records and returns to the real
# return address, written back into that slot: every register is kept
# (gcc -fipa-ra keeps values in call-clobbered registers a local callee
# does not touch, r11 included).
exit:
	lea -0x40(%rsp), %rsp
	mov %rax, 0x30(%rsp)
	mov %rdx, 0x28(%rsp)
	mov %rcx, 0x20(%rsp)
	mov %rsi, 0x18(%rsp)
	mov %rdi, 0x10(%rsp)
	mov %r8, 0x08(%rsp)
	LOOKUP exit_miss
	movq $1, GUARD(%rdi)
	# A resource call's return (its frame on top, no -W cpu) waits for
	# room in exit_res, for its record; every other return here.
	mov DEPTH(%rdi), %rcx
	test %rcx, %rcx
	jz 3f
	shl $5, %rcx
	testq $FLAGRES, FRAMES-32+24(%rdi,%rcx)
	jz 3f
	cmpq $0, WATCH(%rdi)
	je 4f
	CALLCLEAR room
4:	NOWTSC                  # a resource call's: after the call's loads
	jmp 5f
3:	CALLCLEAR room
	rdtsc                   # a function's: its place in its thread only
	shl $32, %rdx
	or %rdx, %rax
5:	mov %rax, %r8
	cmpq $0, WATCH(%rdi)
	jne exit_watch
exit_pop:
	mov DEPTH(%rdi), %rcx
	test %rcx, %rcx
	jz exit_empty
	dec %rcx
	shl $5, %rcx
	lea FRAMES(%rdi,%rcx), %rcx
	mov 16(%rcx), %rsi
	or $1, %rsi
	mov 0(%rcx), %rdx
	mov %rdx, 0x38(%rsp)
	mov 8(%rcx), %rax
	lea 0x38(%rsp), %rdx
	cmp %rdx, %rax
	jb exit_skipped
	testq $FLAGSTOP, 24(%rcx)
	jnz exit_stop
	testq $FLAGRES, 24(%rcx)
	jnz exit_res
	testq $FLAGRET, 24(%rcx)
	jnz exit_ret
	CALLCLEAR emit
exit_done:
	decq DEPTH(%rdi)        # the frame goes once its EXIT is written
	REHOOK
	EXIT_RESTORE
	# Not a ret: the traced function's ret, which came here, consumed the
	# return-stack predictor's entry for this return; another ret would
	# take its caller's entry and mispredict every return up the stack.
	# Signal frames leave the 128 bytes below %rsp alone (the psABI's red
	# zone), so the popped slot still holds the address at the jmp.
	lea 8(%rsp), %rsp
	jmp *-8(%rsp)
exit_skipped:
	testq $FLAGRES, 24(%rcx) # a resource call's frame records nothing
	jnz 1f
	CALLCLEAR emit
	decq DEPTH(%rdi)
	jmp exit_pop
1:	decq DEPTH(%rdi)        # the frames below may: the room the
	push %r8                # return skipped (above), waited for here
	CALLCLEAR room
	pop %r8
	jmp exit_pop
# exit_stop: the return of a frame rtrace pushed with flag 1 (a function
# whose return value is recorded): every register restored, the real
# return address on top of the stack, a stop for rtrace to record the
# EXIT with the value, then the return.
exit_stop:
	decq DEPTH(%rdi)
	REHOOK
	EXIT_RESTORE
	EXIT_WIPE
	push %rax
	IFGONE exit_stop_gone
	pop %rax
	movq $0, -8(%rsp)
exit_stop_trap:
	int3
	ret
exit_stop_gone:                 # the return, its value unrecorded
	pop %rax
	movq $0, -8(%rsp)
	ret
# exit_watch (-W cpu): as entry_watch, a watch event just before the EXIT.
exit_watch:
	rdtscp
	and $0xfff, %ecx
	inc %rcx
	cmp LASTCPU(%rdi), %rcx
	je exit_pop
	mov %rcx, LASTCPU(%rdi)
	mov DEPTH(%rdi), %rsi
	shl $2, %rsi
	WATCHWORD
	dec %r8
	CALLCLEAR emit
	inc %r8
	jmp exit_pop
exit_miss:
	int3                    # rtrace adds the key (the thread changed its %fs base)
	jmp exit_miss_retry
exit_empty:
	int3                    # a hijacked return with an empty shadow stack
	ud2

	.include "args.S"
	.include "res.S"
	.include "walk.S"
