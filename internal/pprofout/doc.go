// Package pprofout encodes a resource trace as a pprof allocation profile
// (profile.proto, gzipped), for `rtrace postproc --pprof FILE` and
// `go tool pprof`.
//
// Every sample has six values, in this order:
//
//   - alloc_objects/count, alloc_space/bytes: every allocation call.
//   - inuse_objects/count, inuse_space/bytes (the default): allocations not
//     released by the end of the trace. A release matches the live
//     allocation with the same resource type and ID. On a resource type
//     with reference counting, an allocation of an ID already live adds a
//     reference and a release takes one away; the allocation is released
//     at zero. On other types an allocation of a live ID takes it over: the
//     older one, never released, stays in use. This is postproc's leak
//     filter (-l).
//   - leak_objects/count, leak_space/bytes: the in-use allocations, when the
//     trace saw its process end (a task exit of the header's pid); else
//     zero, since what is in use mid-run is no leak. A profile comment says
//     which.
//
// Every resource type counts; the space of an allocation is the size the
// trace records for it, bytes for memory. A sample label "resource" holds
// the type's name: `go tool pprof -tagfocus=resource=memory` keeps memory
// only, -tagignore drops a type.
//
// A sample is a distinct (resource type, backtrace), values summed; a call
// without backtrace gets a "[no backtrace]" frame. Frames resolved in the
// trace ("main() at leaky.c:12") give their function, file and line as
// written; others are located by the Resolver, and an address it cannot
// name keeps its address and module only, as pprof shows unknown code.
package pprofout
